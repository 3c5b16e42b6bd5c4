// Live calls: rows arrive from /console/calls/events (server-sent events). Reading works without it.
(function () {
  "use strict";
  var body = document.getElementById("live-calls");
  if (!body || !window.EventSource) { return; }
  var state = document.getElementById("live-state");
  var source = new EventSource("/console/calls/events");
  function cell(row, text, cls) {
    var td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    if (cls) { td.className = cls; }
    row.appendChild(td);
  }
  source.onopen = function () { if (state) { state.textContent = "live"; } };
  source.onerror = function () { if (state) { state.textContent = "reconnecting…"; } };
  source.addEventListener("call", function (event) {
    var data;
    try { data = JSON.parse(event.data); } catch (e) { return; }
    var id = "call-" + String(data.runId) + "-" + String(data.callId);
    var row = document.getElementById(id);
    if (!row) {
      row = document.createElement("tr");
      row.id = id;
      body.insertBefore(row, body.firstChild);
    }
    while (row.firstChild) { row.removeChild(row.firstChild); }
    cell(row, data.time);
    cell(row, data.principal);
    cell(row, data.tool);
    cell(row, data.effects);
    cell(row, data.outcome, "outcome-" + String(data.outcome).replace(/[^a-z_]/g, ""));
    cell(row, data.code);
  });
})();
