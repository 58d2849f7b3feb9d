"""YOLO models (issue 30): the architecture an ultralytics checkpoint's name says, built from the YAML
ultralytics ships, through the real huggingface_hub client against the stand-in. The checkpoints
are built here with ultralytics and saved as it saves them (a pickle); Zoo never fetches them."""

from __future__ import annotations

import csv
import json

import pytest

from zoo_runner.builders.ultralytics_builder import architecture_of


@pytest.mark.parametrize(
    "name, yaml, task",
    [
        ("face_yolov8n.pt", "yolov8n.yaml", "object-detection"),
        ("face_yolov8n_v2.pt", "yolov8n.yaml", "object-detection"),
        ("hand_yolov9c.pt", "yolov9c.yaml", "object-detection"),
        ("person_yolov8s-seg.pt", "yolov8s-seg.yaml", "image-segmentation"),
        ("weights/yolo11m-pose.pt", "yolo11m-pose.yaml", "keypoint-detection"),
        ("yolov8x-cls.pth", "yolov8x-cls.yaml", "image-classification"),
        ("yolov8s-worldv2.pt", "yolov8s-worldv2.yaml", "zero-shot-object-detection"),
        ("yolov8l-world.pt", "yolov8l-world.yaml", "zero-shot-object-detection"),
    ],
)
def test_a_checkpoints_name_says_its_architecture(name, yaml, task):
    arch = architecture_of(name)
    assert arch is not None and (arch["yaml"], arch["task"], arch["checkpoint"]) == (yaml, task, name)


@pytest.mark.parametrize(
    "name", ["yolo-world.pt", "yolo11s-worldv2.pt", "notyolov8n.pt", "yolov8n.safetensors", "model.pt", "yolov7.pt"]
)
def test_names_that_are_no_yolo_architecture_zoo_builds(name):
    assert architecture_of(name) is None


REPOS = {  # repo -> its checkpoints (the class count is what the file would hold; Zoo builds 80)
    "test-org/face-yolo": {"face_yolov8n.pt": ("DetectionModel", "yolov8n.yaml", 1)},
    "test-org/person-yolo-seg": {"person_yolov8n-seg.pt": ("SegmentationModel", "yolov8n-seg.yaml", 1)},
    "test-org/yolo-world": {"yolov8s-worldv2.pt": None},  # written as bytes that are no pickle: never read
}


@pytest.fixture(scope="module")
def yolo_hub(tmp_path_factory):
    pytest.importorskip("ultralytics")  # the extra (.venv-extras in CI); the names above need nothing
    import torch
    from ultralytics.nn import tasks

    from tests.hub_standin import start_standin

    root = tmp_path_factory.mktemp("yolo-hub")
    for repo, checkpoints in REPOS.items():
        folder = root / "repos" / repo
        folder.mkdir(parents=True)
        (folder / "README.md").write_text("YOLO checkpoints, built by the test\n")
        for name, spec in checkpoints.items():
            if spec is None:
                (folder / name).write_bytes(b"not built: a YOLO-World checkpoint is never read")
                continue
            cls, yaml, nc = spec
            model = getattr(tasks, cls)(cfg=yaml, nc=nc, verbose=False)
            torch.save({"model": model.half(), "train_args": {}, "date": "2026-12-05"}, folder / name)
    catalog = root / "catalog.csv"
    with catalog.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model_id", "downloads", "tasks", "parameters", "tags"])
        for i, repo in enumerate(REPOS):
            w.writerow([repo, 1000 - i, "object-detection", "", "['ultralytics', 'pytorch']"])
    base, stop = start_standin(str(catalog), {r: str(root / "repos" / r) for r in REPOS})
    yield base, stop.hub
    stop()


def _validate(zoo, base, tmp_path, model_id, tier="tiny"):
    out = zoo(
        ["validate", model_id, "--backend", "cpu", "--tier", tier, "--json"],
        HF_ENDPOINT=base,
        HF_HUB_OFFLINE="0",
        HF_HUB_CACHE=str(tmp_path / "hf"),
    )
    assert out.stdout.strip(), out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    "repo, architecture, task",
    [
        ("test-org/face-yolo", "yolov8n", "object-detection"),
        ("test-org/person-yolo-seg", "yolov8n-seg", None),
        # the detector over the class embeddings a checkpoint stores: no CLIP text tower in inference
        ("test-org/yolo-world", "yolov8s-worldv2", "object-detection"),  # the catalog row's task
    ],
)
def test_a_yolo_model_validates_without_its_checkpoint_being_read(zoo, yolo_hub, tmp_path, repo, architecture, task):
    base, hub = yolo_hub
    row = _validate(zoo, base, tmp_path, repo)
    assert row["status"] == "pass", (row["status"], row["error"])
    assert (row["library"], row["architecture"]) == ("ultralytics", architecture)
    checkpoint = next(iter(REPOS[repo]))
    assert row["details"]["config_source"].startswith(f"file name: {repo}/{checkpoint}@")
    assert row["details"]["ultralytics_checkpoint"] == checkpoint
    assert row["details"]["parameters"] > 1_000_000
    if task:
        assert row["task"] == task
    assert not any(name == checkpoint and sent for (r, name), sent in hub.sent.items() if r == repo)  # never fetched


def test_the_full_tier_is_pickle_only(zoo, yolo_hub, tmp_path):
    base, _ = yolo_hub
    full = _validate(zoo, base, tmp_path, "test-org/face-yolo", tier="full")
    assert (full["status"], full["reason"]) == ("unsupported", "pickle_only"), full["error"]
