// Optional: click a column header of a table.sortable, or focus it and press Enter or Space, to
// sort its rows by that column (numbers by their data-v value when present); aria-sort says the
// order. A header that holds a link sorts too (its column's figures are what the reader came
// for; the row heads link the same pages). The pages are complete and ordered without this.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var body = table.tBodies[0];
  if (!body || !table.tHead) return;
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    var sort = function () {
      var desc = th.getAttribute("aria-sort") === "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.setAttribute("aria-sort", "none"); });
      th.setAttribute("aria-sort", desc ? "descending" : "ascending");
      var key = function (row) {
        var c = row.cells[col];
        if (!c) return "";
        var v = c.getAttribute("data-v");
        if (v !== null && v !== "" && !isNaN(Number(v))) return Number(v);
        var t = c.textContent.trim();
        return t !== "" && !isNaN(Number(t)) ? Number(t) : t;
      };
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var r = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return desc ? -r : r;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    };
    th.setAttribute("aria-sort", "none");
    var link = th.querySelector("a");
    if (!link) {
      // Reachable from the keyboard; a link already is.
      th.tabIndex = 0;
      th.title = "Sort by this column";
    } else {
      link.title = "Sort by this column";
    }
    th.addEventListener("click", function (e) {
      e.preventDefault();
      sort();
    });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") {
        e.preventDefault();
        sort();
      }
    });
  });
});
