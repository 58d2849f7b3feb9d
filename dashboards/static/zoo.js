/* Draws every <canvas data-chart="ID"> from the JSON config in <script type="application/json" id="ID">,
   with the vendored Chart.js (no CDN). */
(function () {
  function draw() {
    if (typeof Chart === "undefined") { return; }
    Chart.defaults.animation = false;
    Chart.defaults.maintainAspectRatio = false;
    document.querySelectorAll("canvas[data-chart]").forEach(function (el) {
      var src = document.getElementById(el.getAttribute("data-chart"));
      if (!src) { return; }
      var cfg = JSON.parse(src.textContent);
      el.chart = new Chart(el, cfg);
    });
    document.documentElement.setAttribute("data-charts", "ready");
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
