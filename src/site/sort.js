// Optional: click a column header of a table.sortable to sort its rows by that column (numbers by
// their data-v value when present). The pages are complete and ordered by name without this.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var body = table.tBodies[0];
  if (!body || !table.tHead) return;
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.addEventListener("click", function () {
      var desc = th.getAttribute("aria-sort") === "ascending";
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
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
    });
  });
});
