"""The HTML view of `fuel explain`: one self-contained page (inline CSS/JS, no network).

The graph is a layered SVG (longest-path layering with barycentre ordering; devices
coloured; cross-device edges dashed red with their transfer cost) and each decision point has
a `<details>` section with the same candidate table and why line as the text view
(tools/explain_text.py, which owns the shared model of the plan).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from xdsl.dialects import func

from passes.picker.plan import ExecutionPlan, PlanOptions
from runtime.cost import fmt_bytes, fmt_ns
from runtime.module import io_names
from runtime.topology import SystemTopology
from tools.explain_text import (
    _NUMERIC,
    COLUMNS,
    _block_args,
    _Edge,
    _edges,
    _Graph,
    _header,
    _select,
    _View,
    _views,
)

# -- layout ----------------------------------------------------------------------------------

PALETTE = ("#9ecae1", "#a1d99b", "#fdd0a2", "#dadaeb", "#fcbba1", "#c7e9c0", "#fee391", "#d9d9d9")
"""Node fills by device, in topology order (light, so dark labels stay readable)."""

NODE_W, NODE_H, IO_W, DUMMY_W, GAP_X, GAP_Y, MARGIN = 190, 40, 90, 8, 20, 56, 24
"""SVG geometry in px: op node size, input/output pill and long-edge lane widths, gaps, margin."""


def _device_colours(options: PlanOptions, plan: ExecutionPlan) -> dict[str, str]:
    topo = options.topology or SystemTopology.cpu_only()
    names = [d.name for d in topo.devices]
    names += [d.device for d in plan.decisions.values() if d.device not in names]
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(dict.fromkeys(names))}


def _layers(nodes: list[str], edges: list[_Edge]) -> tuple[dict[int, list[str]], list[list[str]]]:
    """Rows of node ids per layer and, per edge, its route through dummy nodes.

    Longest-path layering (`nodes` are in program order, so edges point forward); an edge
    spanning several layers gets one dummy per crossed layer so it is routed between nodes
    rather than through them; then barycentre sweeps (down, up, down) order each row."""
    layer: dict[str, int] = {}
    preds_of: dict[str, list[str]] = {n: [] for n in nodes}
    for e in edges:
        preds_of[e.dst].append(e.src)
    for n in nodes:
        layer[n] = max((layer[p] + 1 for p in preds_of[n]), default=0)
    routes, nbr = [], {n: ([], []) for n in nodes}  # id -> (preds, succs)
    for k, e in enumerate(edges):
        route = [e.src, *(f"d{k}.{lv}" for lv in range(layer[e.src] + 1, layer[e.dst])), e.dst]
        for lv, d in enumerate(route[1:-1], layer[e.src] + 1):
            layer[d], nbr[d] = lv, ([], [])
        for u, w in zip(route, route[1:], strict=False):
            nbr[w][0].append(u)
            nbr[u][1].append(w)
        routes.append(route)
    rows: dict[int, list[str]] = {}
    for n in layer:
        rows.setdefault(layer[n], []).append(n)
    slot = {n: i for row in rows.values() for i, n in enumerate(row)}
    for side, order in ((0, sorted(rows)), (1, sorted(rows, reverse=True)), (0, sorted(rows))):
        for lv in order:
            row = rows[lv]
            bary = {
                n: sum(slot[m] for m in nbr[n][side]) / len(nbr[n][side])
                if nbr[n][side]
                else slot[n]
                for n in row
            }
            row.sort(key=lambda n: bary[n])
            slot.update({n: i for i, n in enumerate(row)})
    return rows, routes


@dataclass
class _Canvas:
    """Centres of nodes and dummies in the top-down layout, and each edge's route."""

    centre: dict[str, tuple[float, float]]
    routes: list[list[str]]
    width: float
    height: float

    @staticmethod
    def build(nodes: list[str], edges: list[_Edge]) -> _Canvas:
        rows, routes = _layers(nodes, edges)

        def w(n: str) -> float:
            if n.startswith("op-"):
                return NODE_W
            return IO_W if n.startswith(("in-", "out")) else DUMMY_W  # else a long-edge lane

        row_w = {lv: sum(w(n) for n in row) + GAP_X * (len(row) - 1) for lv, row in rows.items()}
        width = 2 * MARGIN + max(row_w.values(), default=NODE_W)
        centre: dict[str, tuple[float, float]] = {}
        for lv, row in rows.items():
            x, y = (width - row_w[lv]) / 2, MARGIN + lv * (NODE_H + GAP_Y) + NODE_H / 2
            for n in row:
                centre[n] = (x + w(n) / 2, y)
                x += w(n) + GAP_X
        height = 2 * MARGIN + (max(rows, default=0) + 1) * (NODE_H + GAP_Y) - GAP_Y
        return _Canvas(centre, routes, width, height)


def _esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def _route_path(route: list[str], cv: _Canvas) -> tuple[str, tuple[float, float]]:
    """SVG path data through a route (curves between layers, straight through lanes) and a
    point on its first leg for a label."""
    pts = [cv.centre[n] for n in route]
    half = NODE_H / 2
    (x, y) = pts[0]
    d, y = [f"M{x:.0f},{y + half:.0f}"], y + half
    for i, (nx, ny) in enumerate(pts[1:], 1):
        top = ny - half
        ym = (y + top) / 2
        d.append(f"C{x:.0f},{ym:.0f} {nx:.0f},{ym:.0f} {nx:.0f},{top:.0f}")
        x, y = nx, ny + half
        if i < len(pts) - 1:  # a lane: pass straight through the layer
            d.append(f"L{x:.0f},{y:.0f}")
    (x0, y0), (x1, y1) = pts[0], pts[1]
    return " ".join(d), ((x0 + x1) / 2, (y0 + y1) / 2)


def _svg_edge(e: _Edge, route: list[str], cv: _Canvas) -> str:
    path, (lx, ly) = _route_path(route, cv)
    if not e.crosses:
        return f'<path class="edge" d="{path}" marker-end="url(#arrow)"/>'
    label = f"{e.src_device} → {e.dst_device}: {fmt_ns(e.transfer_ns)} ({fmt_bytes(e.nbytes)})"
    cost = _esc(fmt_ns(e.transfer_ns))
    return (
        f'<g class="xdev"><path class="edge xdev" d="{path}" stroke-dasharray="6 4" '
        f'marker-end="url(#arrow-x)"><title>{_esc(label)}</title></path>'
        f'<text class="halo" x="{lx + 6:.0f}" y="{ly + 4:.0f}">{cost}</text><text '
        f'class="xlabel" x="{lx + 6:.0f}" y="{ly + 4:.0f}">{cost}</text></g>'
    )


def _svg_node(v: _View, cv: _Canvas, colour: str) -> str:
    x, y = cv.centre[f"op-{v.index}"]
    x0, y0 = x - NODE_W / 2, y - NODE_H / 2
    kernel = v.rows[0][0] if v.rows else "?"
    line1 = _clip(f"#{v.index} {v.title.split(' = ')[-1]}", 26)
    line2 = _clip(f"{v.device} · {kernel}", 28)
    return (
        f'<a href="#op-{v.index}"><g class="op" id="node-{v.index}" data-i="{v.index}">'
        f"<title>{_esc(f'#{v.index} {v.title} {v.signature} @{v.device}')}</title>"
        f'<rect x="{x0:.0f}" y="{y0:.0f}" width="{NODE_W}" height="{NODE_H}" rx="6" '
        f'fill="{colour}"/><text x="{x:.0f}" y="{y - 4:.0f}">{_esc(line1)}</text>'
        f'<text class="sub" x="{x:.0f}" y="{y + 12:.0f}">{_esc(line2)}</text>'
        "</g></a>"
    )


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _svg_io(node: str, label: str, cv: _Canvas, colour: str) -> str:
    x, y = cv.centre[node]
    return (
        f'<g class="io"><title>{_esc(label)}</title><rect x="{x - IO_W / 2:.0f}" '
        f'y="{y - NODE_H / 4:.0f}" width="{IO_W}" height="{NODE_H / 2:.0f}" rx="10" '
        f'fill="{colour}"/><text x="{x:.0f}" y="{y + 4:.0f}">{_esc(_clip(label, 12))}</text>'
        f"</g>"
    )


def _render_svg(
    plan: ExecutionPlan,
    views: list[_View],
    edges: list[_Edge],
    colours: dict[str, str],
    default: str,
) -> str:
    """The plan's graph as a standalone, well-formed SVG element (top-down layers)."""
    args = _block_args(plan.order[0]) if plan.order else ()
    fn = plan.order[0].parent_op() if plan.order else None
    ins = io_names(fn)[0] if isinstance(fn, func.FuncOp) else []
    nodes = [f"in-{k}" for k in range(len(args))] + [f"op-{v.index}" for v in views] + ["out"]
    cv = _Canvas.build(nodes, edges)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="graph" width="{cv.width:.0f}" '
        f'height="{cv.height:.0f}" viewBox="0 0 {cv.width:.0f} {cv.height:.0f}" '
        'font-family="system-ui,sans-serif">',
        f"<style>{_SVG_CSS}</style>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker>'
        '<marker id="arrow-x" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#d62728"/>'
        "</marker></defs>",
    ]
    parts += [_svg_edge(e, r, cv) for e, r in zip(edges, cv.routes, strict=True)]
    home = colours.get(default, PALETTE[0])
    parts += [
        _svg_io(f"in-{k}", f"in {ins[k] if k < len(ins) else k}", cv, home)
        for k in range(len(args))
    ]
    parts += [_svg_node(v, cv, colours.get(v.device, "#eee")) for v in views]
    parts += [_svg_io("out", "return", cv, home), "</svg>"]
    return "\n".join(parts)


_SVG_CSS = """
.edge{fill:none;stroke:#999;stroke-width:1.3}
.edge.xdev{stroke:#d62728;stroke-width:2}
.xlabel,.halo{font-size:11px;fill:#d62728}
.halo{stroke:#fff;stroke-width:3px}
.op text,.io text{font-size:12px;text-anchor:middle;pointer-events:none}
.op text.sub{font-size:10.5px;fill:#444}
.op rect{stroke:#555;stroke-width:1}
.op:hover rect,.op.sel rect{stroke:#000;stroke-width:3}
.io rect{stroke:#888;stroke-dasharray:2 2}
"""
"""SVG rules live inside the <svg> so the graph renders the same when saved on its own."""

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;height:100vh;display:flex;
     flex-direction:column}
header{padding:10px 16px;border-bottom:1px solid #ccc;background:#fafafa}
header h1{font-size:17px;margin:0 0 6px}
header table td{padding:0 12px 0 0;vertical-align:top}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:12px;border:1px solid #888;vertical-align:middle;
    margin-right:4px}
.dash{display:inline-block;width:26px;border-top:2px dashed #d62728;vertical-align:middle;
      margin-right:4px}
main{display:flex;flex:1;min-height:0}
#pane{flex:1 1 50%;overflow:auto;border-right:1px solid #ccc;background:#fff}
#list{flex:1 1 50%;overflow:auto;padding:8px 12px}
details{border:1px solid #ddd;border-radius:4px;margin:4px 0;padding:2px 8px}
details[open]{background:#fcfcfc}
details.sel{outline:2px solid #333}
summary{cursor:pointer;font-family:ui-monospace,monospace;font-size:12.5px}
table.c{border-collapse:collapse;margin:6px 0;font-size:12.5px}
table.c th,table.c td{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}
table.c td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.winner td{font-weight:600;background:#eef7ee}
tr.rejected td,tr.other td{color:#777}
.why{margin:4px 0 6px;font-size:13px}
button{margin-left:6px}
"""

_JS = """
(function(){
  var zoom=1, svg=document.getElementById('graph');
  var w0=+svg.getAttribute('width'), h0=+svg.getAttribute('height');
  function setZoom(z){zoom=Math.max(0.1,Math.min(4,z));
    svg.setAttribute('width',w0*zoom);svg.setAttribute('height',h0*zoom);}
  document.getElementById('zin').onclick=function(){setZoom(zoom*1.25)};
  document.getElementById('zout').onclick=function(){setZoom(zoom/1.25)};
  document.getElementById('zfit').onclick=function(){
    setZoom(document.getElementById('pane').clientWidth/w0)};
  document.getElementById('all').onclick=function(){
    document.querySelectorAll('details').forEach(function(d){d.open=true})};
  document.getElementById('none').onclick=function(){
    document.querySelectorAll('details').forEach(function(d){d.open=false})};
  function select(i){
    document.querySelectorAll('.sel').forEach(function(e){e.classList.remove('sel')});
    var d=document.getElementById('op-'+i), n=document.getElementById('node-'+i);
    if(d){d.open=true;d.classList.add('sel');d.scrollIntoView({block:'nearest'});}
    if(n){n.classList.add('sel');}
  }
  document.querySelectorAll('.op').forEach(function(n){
    n.addEventListener('click',function(ev){ev.preventDefault();
      history.replaceState(null,'','#op-'+n.dataset.i);select(n.dataset.i);});});
  document.querySelectorAll('summary').forEach(function(s){
    s.addEventListener('click',function(){var i=s.parentNode.id.slice(3);
      var n=document.getElementById('node-'+i);
      if(n){n.scrollIntoView({block:'center',inline:'center'});}});});
  var m=/^#op-(\\d+)$/.exec(location.hash); if(m){select(m[1]);}
})();
"""


def _details(v: _View, open_: bool) -> str:
    head = "".join(f"<th>{_esc(c)}</th>" for c in COLUMNS)
    body = []
    for r in v.rows:
        verdict = r[-1]
        cls = (
            verdict
            if verdict in ("winner", "kept")
            else ("rejected" if verdict.startswith("rejected") else "other")
        )
        cells = "".join(
            f'<td class="n">{_esc(c)}</td>' if i in _NUMERIC else f"<td>{_esc(c)}</td>"
            for i, c in enumerate(r)
        )
        body.append(f'<tr class="{cls}">{cells}</tr>')
    return (
        f'<details id="op-{v.index}"{" open" if open_ else ""}><summary>#{v.index} '
        f"{_esc(v.title)} {_esc(v.signature)} @{_esc(v.device)}</summary>"
        f'<table class="c"><tr>{head}</tr>{"".join(body)}</table>'
        f'<p class="why"><b>why:</b> {_esc(v.why)}</p></details>'
    )


def explain_html(
    plan: ExecutionPlan,
    module_name: str,
    options: PlanOptions,
    *,
    judge_label: str | None = None,
    op_index: int | None = None,
) -> str:
    """One self-contained page: header, device legend, the graph as SVG (click a node for its
    candidates) and a `<details>` section per decision point (`op_index` opens that one)."""
    g = _Graph(plan)
    topo = options.topology or SystemTopology.cpu_only()
    edges = _edges(g, topo, options.default_device)
    views = _views(plan, options, g)
    _select(views, op_index)  # validates the index
    colours = _device_colours(options, plan)
    header = _header(plan, module_name, options, judge_label, edges)
    counts = {dev: sum(1 for v in views if v.device == dev) for dev in colours}
    legend = "".join(
        f'<span><i class="sw" style="background:{c}"></i>{_esc(dev)} ({counts[dev]} ops)</span>'
        for dev, c in colours.items()
    )
    legend += '<span><i class="dash"></i>cross-device copy (transfer cost)</span>'
    rows = "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>" for k, v in header[1:])
    svg = _render_svg(plan, views, edges, colours, options.default_device)
    details = "\n".join(_details(v, v.index == op_index) for v in views)
    hash_js = f"location.hash='#op-{op_index}';" if op_index is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>fuel explain: {_esc(module_name)}</title><style>{_CSS}</style></head>
<body><header><h1>fuel explain: {_esc(module_name)}</h1><table>{rows}</table>
<div class="legend" id="legend">{legend}
<button id="zout">−</button><button id="zin">+</button><button id="zfit">fit</button>
<button id="all">expand all</button><button id="none">collapse all</button></div></header>
<main><div id="pane">
{svg}
</div><div id="list">
{details}
</div></main>
<script>{hash_js}{_JS}</script></body></html>
"""
