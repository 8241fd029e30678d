// Auto-refresh for the admin UI: reloads the page every few seconds while
// the box is ticked (remembered in localStorage). The pages are rendered
// on the server, so a reload is the whole update.
(function () {
  var box = document.getElementById("autorefresh");
  if (!box) return;
  var key = "cairn-autorefresh", timer = null;
  function arm() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (box.checked) timer = setTimeout(function () { location.reload(); }, 5000);
  }
  box.checked = localStorage.getItem(key) === "1";
  box.addEventListener("change", function () {
    localStorage.setItem(key, box.checked ? "1" : "0");
    arm();
  });
  arm();
})();
