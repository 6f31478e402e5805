// Sortable tables without a framework: a click on a header sorts its table's rows by that
// column (numbers as numbers, "–" last), a second click reverses.
(function () {
  "use strict";
  function value(cell) {
    var text = cell.textContent.trim();
    var number = parseFloat(text.replace(/,/g, ""));
    return text === "–" || text === "" ? null :
      (/^[-+]?[\d,]*\.?\d+(e[-+]?\d+)?%?$/i.test(text) ? number : text.toLowerCase());
  }
  function compare(a, b) {
    if (a === b) { return 0; }
    if (a === null) { return 1; }
    if (b === null) { return -1; }
    if (typeof a === typeof b) { return a < b ? -1 : 1; }
    return typeof a === "number" ? -1 : 1;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var headers = table.querySelectorAll("thead th");
    headers.forEach(function (th, column) {
      th.setAttribute("tabindex", "0");
      th.addEventListener("click", function () {
        var descending = th.getAttribute("aria-sort") === "ascending";
        headers.forEach(function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (x, y) {
          var a = value(x.cells[column]), b = value(y.cells[column]);
          if (a === null || b === null) { return compare(a, b); }   // blanks stay last
          return descending ? -compare(a, b) : compare(a, b);
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
}());
