"use strict";
(function () {
  const table = document.getElementById("matrix");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const search = document.getElementById("search");
  const failingOnly = document.getElementById("failing-only");
  const shown = document.getElementById("shown-count");
  const panel = document.getElementById("panel");
  const panelBody = document.getElementById("panel-body");

  function applyFilters() {
    const query = search.value.trim().toLowerCase();
    let visible = 0;
    for (const row of rows) {
      const keep = (!failingOnly.checked || row.dataset.failing === "1") &&
        (!query || row.textContent.toLowerCase().includes(query));
      row.hidden = !keep;
      if (keep) visible += 1;
    }
    shown.textContent = visible + " of " + rows.length + " nodes";
  }
  search.addEventListener("input", applyFilters);
  failingOnly.addEventListener("change", applyFilters);

  function sortKey(row, index) {
    const cell = row.cells[index];
    // Rows whose reason spans the matrix sort by that reason in every matrix column.
    const target = cell || row.cells[row.cells.length - 1];
    return target ? (target.dataset.key || "") : "";
  }
  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
  table.tHead.addEventListener("click", function (event) {
    const th = event.target.closest("th");
    if (!th) return;
    const index = Array.from(th.parentNode.cells).indexOf(th);
    const ascending = th.getAttribute("aria-sort") !== "ascending";
    for (const other of th.parentNode.cells) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const numeric = th.dataset.sort === "status";
    const sorted = rows.slice().sort(function (a, b) {
      const ka = sortKey(a, index), kb = sortKey(b, index);
      const order = numeric ? Number(ka) - Number(kb) : collator.compare(ka, kb);
      return (ascending ? order : -order) || Number(a.dataset.order) - Number(b.dataset.order);
    });
    for (const row of sorted) body.appendChild(row);
    table.classList.add("sorted");
  });

  function openDetail(id) {
    const template = document.getElementById(id);
    if (!template) return;
    panelBody.replaceChildren(template.content.cloneNode(true));
    panel.hidden = false;
    document.getElementById("panel-close").focus();
  }
  body.addEventListener("click", function (event) {
    const cell = event.target.closest("[data-detail]");
    if (cell) openDetail(cell.dataset.detail);
  });
  body.addEventListener("keydown", function (event) {
    const cell = event.target.closest("[data-detail]");
    if (cell && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      openDetail(cell.dataset.detail);
    }
  });
  document.getElementById("panel-close").addEventListener("click", function () {
    panel.hidden = true;
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") panel.hidden = true;
  });
  applyFilters();
})();
