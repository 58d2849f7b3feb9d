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
/* The scope form: choosing a backend · tier sends the form with that option's tier (wired here:
   the Content-Security-Policy runs no inline event handler). */
(function () {
  function wire() {
    document.querySelectorAll("form.scope-form select[name=backend]").forEach(function (sel) {
      sel.addEventListener("change", function () {
        sel.form.elements.tier.value = sel.selectedOptions[0].dataset.tier;
        sel.form.submit();
      });
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", wire); } else { wire(); }
})();
