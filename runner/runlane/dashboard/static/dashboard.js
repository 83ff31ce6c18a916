// runlane dashboard: live parts. Pages are complete without this script; it only keeps
// them current through server-sent events and draws the charts with uPlot. Data is
// inserted as text (textContent), never as HTML.
(function () {
  "use strict";

  function fmtMs(ms) {
    if (ms === null || ms === undefined) return "\u2013";
    if (ms < 1000) return ms + " ms";
    if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
    if (ms < 7200000) return (ms / 60000).toFixed(1) + " min";
    return (ms / 3600000).toFixed(1) + " h";
  }

  function fmtTime(iso) {
    if (!iso) return "\u2013";
    return iso.replace("T", " ").replace(/\.\d+/, "").replace(/\+00:00$/, " UTC");
  }

  function live(on) {
    var el = document.getElementById("live");
    if (!el) return;
    el.textContent = on ? "live" : "reconnecting";
    el.className = on ? "live on" : "live";
  }

  // -- overview ---------------------------------------------------------------------
  var charts = {};

  function chartSize(el) {
    return { width: Math.max(320, el.clientWidth), height: 250 };
  }

  function drawCharts(data) {
    if (!window.uPlot || !data) return;
    var lat = document.getElementById("chart-latency");
    var dep = document.getElementById("chart-depth");
    var fai = document.getElementById("chart-failures");
    if (!lat || !dep || !fai) return;
    var i = data.interactive, b = data.background;
    var latencyData = [data.x, i.p50_ms, i.p90_ms, i.p99_ms, b.p50_ms, b.p90_ms, b.p99_ms];
    var depthData = [data.x, i.queued, b.queued];
    var f = data.failures || { x: [], failed: [], reaped: [] };
    var failureData = [f.x, f.failed, f.reaped];
    if (charts.latency) {
      charts.latency.setData(latencyData);
      charts.depth.setData(depthData);
      charts.failures.setData(failureData);
      return;
    }
    var ms = { label: "ms", values: function (u, vals) { return vals.map(fmtMs); }, size: 70 };
    function line(label, color, dash) {
      // a minute without a first response is a gap, not zero; points keep sparse
      // minutes (one sample here and there) visible
      return { label: label, stroke: color, width: 2, dash: dash, spanGaps: false,
               points: { show: true, size: 4, fill: color },
               value: function (u, v) { return fmtMs(v); } };
    }
    charts.latency = new uPlot(Object.assign(chartSize(lat), {
      scales: { x: { time: true } },
      axes: [{}, ms],
      series: [{}, line("interactive p50", "#2f6fde"), line("interactive p90", "#7aa2ea"),
               line("interactive p99", "#b8cdf4"), line("background p50", "#d9822b", [6, 4]),
               line("background p90", "#e8ae73", [6, 4]), line("background p99", "#f3d2b0", [6, 4])],
    }), latencyData, lat);
    charts.depth = new uPlot(Object.assign(chartSize(dep), {
      scales: { x: { time: true } },
      axes: [{}, { label: "runs", size: 60 }],
      series: [{}, { label: "interactive", stroke: "#2f6fde", fill: "rgba(47,111,222,.12)", width: 2 },
               { label: "background", stroke: "#d9822b", fill: "rgba(217,130,43,.12)", width: 2 }],
    }), depthData, dep);
    charts.failures = new uPlot(Object.assign(chartSize(fai), {
      scales: { x: { time: true } },
      axes: [{}, { label: "runs", size: 60 }],
      series: [{}, { label: "failed", stroke: "#c0392b", width: 2, points: { show: true, size: 4 } },
               { label: "reaped", stroke: "#8e44ad", width: 2, dash: [6, 4], points: { show: true, size: 4 } }],
    }), failureData, fai);
  }

  function overview() {
    var dataEl = document.getElementById("chart-data");
    drawCharts(dataEl ? JSON.parse(dataEl.textContent) : null);
    var es = new EventSource("/events/overview");
    es.onopen = function () { live(true); };
    es.onerror = function () { live(false); };
    es.addEventListener("overview", function (ev) {
      live(true);
      var d = JSON.parse(ev.data);
      d.lanes.forEach(function (l) {
        var row = document.querySelector('#lanes tr[data-lane="' + l.lane + '"]');
        if (!row) return;
        ["queued", "due", "running"].forEach(function (k) {
          row.querySelector('[data-field="' + k + '"]').textContent = String(l[k]);
        });
        row.querySelector('[data-field="oldest_due_wait_ms"]').textContent = fmtMs(l.oldest_due_wait_ms);
      });
      var delay = document.getElementById("delay");
      if (delay) {
        delay.hidden = !d.delay.delayed_runs;
        document.getElementById("delay-runs").textContent = String(d.delay.delayed_runs);
        document.getElementById("delay-wait").textContent = fmtMs(d.delay.oldest_wait_ms);
      }
      if (d.chart) drawCharts(d.chart);
      document.body.setAttribute("data-updated", String(Date.now()));
    });
  }

  // -- run ----------------------------------------------------------------------------
  function run() {
    var box = document.getElementById("run");
    if (!box || box.getAttribute("data-terminal") === "yes") return;
    var runId = box.getAttribute("data-run");
    var showContent = box.getAttribute("data-content") === "yes";
    var list = document.getElementById("outputs");
    var es = new EventSource("/events/runs/" + runId + "?after=" + box.getAttribute("data-after"));
    es.onopen = function () { live(true); };
    es.onerror = function () { live(false); };
    es.addEventListener("output", function (ev) {
      var o = JSON.parse(ev.data);
      if (list.querySelector('li[data-output="' + o.output_id + '"]')) return;
      var li = document.createElement("li");
      li.setAttribute("data-output", String(o.output_id));
      var meta = document.createElement("span");
      meta.className = "muted";
      meta.textContent = "#" + o.output_id + " \u00b7 attempt " + o.attempt + " \u00b7 " + o.kind + " ";
      li.appendChild(meta);
      var body = document.createElement("span");
      if (showContent && o.body !== null) {
        body.className = "body";
        body.textContent = o.body;
      } else {
        body.className = "muted";
        body.textContent = "[" + o.chars + " characters hidden]";
      }
      li.appendChild(body);
      list.appendChild(li);
      list.scrollTop = list.scrollHeight;
    });
    es.addEventListener("status", function (ev) {
      var s = JSON.parse(ev.data);
      var state = document.getElementById("run-state");
      state.textContent = s.state;
      state.className = "state " + s.state;
      document.getElementById("run-reason").textContent = s.reason || "";
      document.getElementById("run-attempt").textContent = String(s.attempt);
      document.getElementById("run-finished").textContent = fmtTime(s.finished_at);
    });
    es.addEventListener("end", function () {
      es.close();
      live(false);
      document.getElementById("live").textContent = "ended";
      var stop = document.getElementById("stop");
      if (stop) stop.hidden = true;
      document.getElementById("stream-end").hidden = false;
      box.setAttribute("data-terminal", "yes");
    });
  }

  // Lists of what moves (running and queued runs, workers) reload every few seconds,
  // until the reader starts changing a filter.
  function refresh(seconds) {
    var editing = false;
    document.querySelectorAll("form.filter").forEach(function (f) {
      f.addEventListener("input", function () { editing = true; });
      f.addEventListener("change", function () { editing = true; });
    });
    window.setInterval(function () { if (!editing) window.location.reload(); }, seconds * 1000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var every = Number(document.body.getAttribute("data-refresh"));
    if (every > 0) refresh(every);
    var page = document.body.getAttribute("data-page");
    if (page === "overview") overview();
    if (page === "runs") run();
  });
})();
