/**
 * The dashboard's stylesheet and script, served from the dashboard itself (nothing from a CDN, so
 * it works offline) and as separate files, so the pages' Content-Security-Policy can forbid
 * inline scripts: markup smuggled in through store data could not run even if it got through.
 */

/** The stylesheet. */
export const css = `
:root { --fg:#1d2330; --muted:#5b6475; --line:#dde1e8; --bg:#f6f7f9; --card:#fff; --accent:#2f5bd3;
  --ready:#2f7d4f; --inflight:#2f5bd3; --acked:#7a8291; --quarantined:#b3261e; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; flex-wrap:wrap; align-items:center; gap:8px 24px; padding:10px 24px; background:#1d2330; color:#fff; }
header .brand { font-weight:600; letter-spacing:.02em; }
header nav { display:flex; flex-wrap:wrap; gap:4px 16px; }
header nav a { color:#c9d3ea; text-decoration:none; }
header nav a.here { color:#fff; border-bottom:2px solid #fff; padding-bottom:2px; }
header .who { margin-left:auto; color:#c9d3ea; font-size:13px; }
header .who a, header .who button { color:#fff; }
header .who form { display:inline; }
header .who button { background:none; border:0; cursor:pointer; text-decoration:underline; font:inherit; padding:0; }
main { padding:20px 24px; max-width:1280px; }
h1 { font-size:20px; margin:0 0 12px; }
h2 { font-size:15px; margin:20px 0 8px; }
.cards { display:flex; flex-wrap:wrap; gap:12px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:12px 16px; min-width:150px; }
.card .n { font-size:24px; font-weight:600; }
.card .l { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
table { border-collapse:collapse; background:var(--card); border:1px solid var(--line); width:100%; }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:12px; color:var(--muted); text-transform:uppercase; letter-spacing:.04em; background:#fafbfc; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
td.id { font-family:ui-monospace, SFMono-Regular, Menlo, monospace; word-break:break-all; }
.state { display:inline-block; padding:0 6px; border-radius:3px; font-size:12px; color:#fff; }
.state.ready { background:var(--ready); } .state.inflight { background:var(--inflight); }
.state.acked { background:var(--acked); } .state.quarantined { background:var(--quarantined); }
.state.drained { background:#c3c8d2; color:#333; }
.muted { color:var(--muted); }
.note { color:var(--muted); font-size:12px; margin:6px 0; }
pre { background:#fff; border:1px solid var(--line); padding:10px; overflow:auto; max-height:420px; white-space:pre-wrap; word-break:break-all; }
dl.fields { display:grid; grid-template-columns:max-content 1fr; gap:4px 16px; background:#fff; border:1px solid var(--line); padding:12px 16px; margin:0; }
dl.fields dt { color:var(--muted); }
dl.fields dd { margin:0; }
form.filters { display:flex; flex-wrap:wrap; gap:8px; align-items:end; margin-bottom:12px; }
form label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); gap:2px; }
input, select, textarea { font:inherit; padding:4px 6px; border:1px solid #b9c0cc; border-radius:4px; background:#fff; }
textarea { width:100%; min-height:60px; }
button { font:inherit; padding:5px 12px; border-radius:4px; border:1px solid var(--accent); background:var(--accent); color:#fff; cursor:pointer; }
button.secondary { background:#fff; color:var(--accent); }
.redrive { background:#fff; border:1px solid var(--line); border-left:4px solid var(--quarantined); padding:12px 16px; margin-top:16px; max-width:640px; }
.redrive form { display:grid; gap:8px; }
.error { background:#fdecea; border:1px solid #f5c2bd; color:#7d1a14; padding:8px 12px; border-radius:4px; margin:8px 0; }
.ok { background:#e8f5ec; border:1px solid #b9dfc6; color:#1f5c35; padding:8px 12px; border-radius:4px; margin:8px 0; }
.pager { margin:10px 0; display:flex; gap:12px; }
.pager a { color:var(--accent); }
a { color:var(--accent); }
.live { font-size:12px; color:#c9d3ea; }
svg.chart { background:#fff; border:1px solid var(--line); max-width:100%; height:auto; }
main section[data-live] { overflow-x:auto; }
/* A phone: the header's parts and the tables fit the screen's width (wide tables scroll inside their section). */
@media (max-width:600px) {
  header { padding:8px 12px; gap:6px 16px; }
  header .who { margin-left:0; }
  main { padding:12px; }
}
svg.chart .claims { fill:#2f5bd3; } svg.chart .acks { fill:#2f7d4f; }
svg.chart text { fill:#5b6475; font-size:10px; }
`

/**
 * The script: refreshes the parts of the page marked `data-live` in place (a poll of the same URL,
 * parsed and swapped by id), paused while the tab is hidden or the operator pauses it.
 */
export const js = `
(function () {
  var body = document.body;
  var every = Number(body.getAttribute("data-refresh") || "0");
  var status = document.getElementById("live-status");
  var toggle = document.getElementById("live-toggle");
  if (!every || !status) return;
  var paused = false;
  if (toggle) toggle.addEventListener("change", function () { paused = !toggle.checked; });
  function refresh() {
    if (paused || document.hidden) return;
    fetch(location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
      .then(function (text) {
        var next = new DOMParser().parseFromString(text, "text/html");
        var parts = document.querySelectorAll("[data-live]");
        for (var i = 0; i < parts.length; i++) {
          var fresh = next.getElementById(parts[i].id);
          if (fresh) parts[i].replaceWith(fresh);
        }
        status.textContent = "live · updated " + new Date().toLocaleTimeString();
        body.setAttribute("data-refreshed", String(Number(body.getAttribute("data-refreshed") || "0") + 1));
      })
      .catch(function (e) { status.textContent = "live · refresh failed (" + e.message + ")"; });
  }
  setInterval(refresh, every * 1000);
})();
`
