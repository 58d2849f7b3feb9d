"""YOLO models (the ``ultralytics`` extra): the architecture a checkpoint's file name names.

An ultralytics repo ships checkpoints (``face_yolov8n.pt``, ``person_yolov8s-seg.pt``): pickles of
the whole model object, which only a model process could unpickle, and which Zoo does not load
(``pickle_only`` at the full tier, as for any pickle). It has no config file. What the parent
knows without opening one is its name, and ultralytics names checkpoints after the model's YAML:
version, scale and task (``yolov8n``, ``yolov9c``, ``yolo11s-seg``). So the parent picks the repo's
first checkpoint whose name says that (:func:`config_from_files`, recorded in ``config_source``),
and the model process builds that architecture from the YAML ultralytics ships, with seeded
weights and the default 80 classes (a checkpoint's own class count is inside the pickle), and
runs it on 64 and 96 px images. YOLO-World checkpoints (``yolov8s-worldv2.pt``) build the same way:
their detector reads class embeddings that the checkpoint stores (``txt_feats``, written when classes
were set); CLIP's text tower runs only to set new classes, never in inference, so the model process
builds ``WorldModel`` with 80 seeded class embeddings of CLIP's width. A repo whose checkpoints name
no such architecture (a name that is not ultralytics') is ``library_unsupported``, saying so.
ultralytics is imported only in the model process.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..exceptions import NotSupported
from ..statuses import Reason
from .base import Built, ConfigPlan

# yolov8n, yolov9c, yolo11s, yolov10x, yolov8s-worldv2, with an optional task suffix; "rtdetr" is another family
NAME = re.compile(
    r"(?<![a-z0-9])(yolo(?:v(?:3|5|6|8|9|10)|11|12))([ntsmlxce])(?:-(seg|pose|cls|obb|worldv2|world))?(?![a-z0-9])"
)
TASKS = {  # suffix -> (ultralytics.nn.tasks class, the Hub's task)
    None: ("DetectionModel", "object-detection"),
    "seg": ("SegmentationModel", "image-segmentation"),
    "pose": ("PoseModel", "keypoint-detection"),
    "cls": ("ClassificationModel", "image-classification"),
    "obb": ("OBBModel", "object-detection"),
    # the detector over stored class embeddings (txt_feats); CLIP only sets new classes, outside inference
    "world": ("WorldModel", "zero-shot-object-detection"),
    "worldv2": ("WorldModel", "zero-shot-object-detection"),
}
WORLD_TASKS = ("world", "worldv2")
TINY_SIZES = (64, 96)  # multiples of the largest stride (32)
CHECKPOINT_SUFFIXES = (".pt", ".pth")


def architecture_of(filename: str) -> dict[str, Any] | None:
    """What a checkpoint's file name says it is: ``{"yaml", "task_class", "checkpoint"}``; None
    where it names no ultralytics architecture Zoo builds."""
    base = os.path.basename(filename).lower()
    if not base.endswith(CHECKPOINT_SUFFIXES):
        return None
    m = NAME.search(base.rsplit(".", 1)[0])
    if not m:
        return None
    family, scale, task = m.group(1), m.group(2), m.group(3)
    if task in WORLD_TASKS and family != "yolov8":
        return None  # ultralytics ships YOLO-World's YAMLs for v8 only (yolov8-world.yaml, yolov8-worldv2.yaml)
    return {
        "yaml": f"{family}{scale}{'-' + task if task else ''}.yaml",
        "task_class": TASKS[task][0],
        "task": TASKS[task][1],
        "checkpoint": filename,
    }


def config_from_files(model_id: str, files: list[str]) -> dict[str, Any]:
    """The parent's config of an ultralytics repo, from its file listing alone."""
    checkpoints = sorted(f for f in files if f.lower().endswith(CHECKPOINT_SUFFIXES))
    for name in checkpoints:
        arch = architecture_of(name)
        if arch:
            return arch
    said = ", ".join(checkpoints[:5]) or "none"
    raise NotSupported(
        Reason.LIBRARY_UNSUPPORTED,
        f"{model_id}: no ultralytics checkpoint named after a YOLO architecture Zoo builds (checkpoints: {said})",
    )


class UltralyticsBuilder:
    library = "ultralytics"
    config_from_files = staticmethod(config_from_files)

    def plan(self, request: Any) -> ConfigPlan:
        cfg = dict(request.config or {})
        if not isinstance(cfg.get("yaml"), str) or cfg.get("task_class") not in {c for c, _ in TASKS.values()}:
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{request.model_id}: no YOLO architecture to build")
        if request.tier == "full":
            raise NotSupported(
                Reason.PICKLE_ONLY,
                f"{request.model_id}: ultralytics checkpoints are pickles ({cfg.get('checkpoint')}); Zoo loads "
                "safetensors only",
            )
        shapes = [{"batch": 1, "size": TINY_SIZES[0]}, {"batch": 2, "size": TINY_SIZES[1]}]
        source = request.config_source or f"file name: {request.model_id}/{cfg.get('checkpoint')}"
        graph = {"yaml": cfg["yaml"], "task_class": cfg["task_class"], "nc": 80}
        return ConfigPlan(
            architecture=cfg["yaml"].removesuffix(".yaml"), config=graph, config_source=source, shapes=shapes
        )

    def task(self, request: Any, plan: ConfigPlan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or next(t for c, t in TASKS.values() if c == plan.config["task_class"])

    def build(self, request: Any, plan: ConfigPlan | None = None) -> Built:
        os.environ.setdefault("YOLO_OFFLINE", "1")  # no download, no update check (there is no network anyway)
        os.environ.setdefault("YOLO_VERBOSE", "False")
        try:
            from ultralytics.nn import tasks
        except ImportError as exc:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"ultralytics models need the ultralytics extra (pip install 'zoo[ultralytics]'): {exc}",
            ) from exc
        import torch

        from ..weights import init_weights

        plan = plan or self.plan(request)
        graph = plan.config
        torch.manual_seed(request.seed)
        try:
            model = getattr(tasks, graph["task_class"])(cfg=graph["yaml"], ch=3, nc=graph["nc"], verbose=False)
        except FileNotFoundError as exc:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"this ultralytics has no {graph['yaml']} ({request.model_id})"
            ) from exc
        init_weights(model, request.seed)
        model.eval()

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            gen = torch.Generator().manual_seed(seed)
            return {"x": torch.rand(shape["batch"], 3, shape["size"], shape["size"], generator=gen)}

        return Built(
            model=model,
            library=self.library,
            architecture=plan.architecture,
            task=self.task(request, plan),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
            details={"ultralytics_checkpoint": (request.config or {}).get("checkpoint")},
        )
