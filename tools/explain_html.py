"""The HTML view of `fuel explain`: one self-contained page (inline CSS/JS, no network).

The graph is a layered SVG (longest-path layering with barycentre ordering; devices
coloured; cross-device edges dashed red with their transfer cost) and each decision point has
a `<details>` section with the same candidate table and why line as the text view
(tools/explain_text.py, which owns the shared model of the plan).

To stay readable at 1 000+ ops the ops are drawn in collapsible groups (by layer/block name,
else chunks of program order: tools/explain_groups.py), each its own SVG whose edges to other
groups end at pills linking there; a plan over EXPAND_ALL_MAX ops starts collapsed. A minimap
(one row per op) marks the view and jumps on click, a search box highlights ops by name,
kernel or device, and zoom never goes below MIN_ZOOM (tools/explain_html_assets.py).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, replace

from xdsl.dialects import func

from passes.picker.plan import ExecutionPlan, PlanOptions
from runtime.cost import fmt_bytes, fmt_ns
from runtime.module import io_names
from runtime.topology import SystemTopology
from tools.explain_groups import EXPAND_ALL_MAX, Group, group_ops, op_name
from tools.explain_html_assets import CSS, GROUP_HEAD_H, JS, SVG_CSS
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


def _svg_edge(e: _Edge, route: list[str], cv: _Canvas, g: int) -> str:
    path, (lx, ly) = _route_path(route, cv)
    if not e.crosses:
        return f'<path class="edge" d="{path}" marker-end="url(#arrow-{g})"/>'
    label = f"{e.src_device} → {e.dst_device}: {fmt_ns(e.transfer_ns)} ({fmt_bytes(e.nbytes)})"
    cost = _esc(fmt_ns(e.transfer_ns))
    return (
        f'<g class="xdev"><path class="edge xdev" d="{path}" stroke-dasharray="6 4" '
        f'marker-end="url(#arrow-x-{g})"><title>{_esc(label)}</title></path>'
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
    """An input/output pill; a pill for an op in another group links to that op."""
    x, y = cv.centre[node]
    m = re.search(r"op-(\d+)$", node)
    attrs = f' class="io port" data-i="{m.group(1)}"' if m else ' class="io"'
    pill = (
        f'<g{attrs}><title>{_esc(label)}</title><rect x="{x - IO_W / 2:.0f}" '
        f'y="{y - NODE_H / 4:.0f}" width="{IO_W}" height="{NODE_H / 2:.0f}" rx="10" '
        f'fill="{colour}"/><text x="{x:.0f}" y="{y + 4:.0f}">{_esc(_clip(label, 12))}</text>'
        f"</g>"
    )
    return f'<a href="#op-{m.group(1)}">{pill}</a>' if m else pill


def _port_label(end: str, ins: list[str], incoming: bool) -> str:
    """What the pill for an edge end outside the group says: graph input, return or an op."""
    if end.startswith("in-"):
        k = int(end[3:])
        return f"in {ins[k] if k < len(ins) else k}"
    if end == "out":
        return "return"
    return f"{'from' if incoming else 'to'} #{end[3:]}"


def _render_svg(
    group: Group,
    views: list[_View],
    edges: list[_Edge],
    ins: list[str],
    colours: dict[str, str],
    default: str,
) -> tuple[str, float]:
    """One group's part of the graph as a standalone, well-formed SVG (top-down layers) and
    its height; an edge from or to an op outside the group ends at a pill linking to it."""
    inside = {f"op-{i}" for i in group.ops}
    local: list[_Edge] = []
    ports_in: dict[str, str] = {}
    ports_out: dict[str, str] = {}
    labels: dict[str, str] = {}
    for e in edges:
        if e.src not in inside and e.dst not in inside:
            continue
        src, dst = e.src, e.dst
        if src not in inside:
            src = ports_in.setdefault(src, f"in-{src}")
            labels[src] = _port_label(e.src, ins, incoming=True)
        if dst not in inside:
            dst = ports_out.setdefault(dst, f"out-{dst}")
            labels[dst] = _port_label(e.dst, ins, incoming=False)
        local.append(replace(e, src=src, dst=dst))
    nodes = [*ports_in.values(), *(f"op-{i}" for i in group.ops), *ports_out.values()]
    cv = _Canvas.build(nodes, local)
    g = group.index
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{cv.width:.0f}" '
        f'height="{cv.height:.0f}" viewBox="0 0 {cv.width:.0f} {cv.height:.0f}" '
        'font-family="system-ui,sans-serif">',
        f"<style>{SVG_CSS}</style>",
        f'<defs><marker id="arrow-{g}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker>'
        f'<marker id="arrow-x-{g}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#d62728"/>'
        "</marker></defs>",
    ]
    parts += [_svg_edge(e, r, cv, g) for e, r in zip(local, cv.routes, strict=True)]
    home = colours.get(default, PALETTE[0])
    parts += [_svg_io(n, labels[n], cv, home) for n in ports_in.values()]
    parts += [_svg_node(views[i], cv, colours.get(views[i].device, "#eee")) for i in group.ops]
    parts += [_svg_io(n, labels[n], cv, home) for n in ports_out.values()]
    parts.append("</svg>")
    return "\n".join(parts), cv.height


def _group_head(group: Group, views: list[_View]) -> str:
    """The one-line summary of a group: label, op range, count and ops per device."""
    devs: dict[str, int] = {}
    for i in group.ops:
        devs[views[i].device] = devs.get(views[i].device, 0) + 1
    per = ", ".join(f"{d} {n}" for d, n in devs.items())
    first, last = group.ops[0], group.ops[-1]
    return f"{group.label} · #{first}–#{last} · {len(group.ops)} ops · {per}"


def _minimap(groups: list[Group], views: list[_View], colours: dict[str, str]) -> str:
    """A column with one row per op (device colour), group cuts, and a box for the view."""
    n = max(len(views), 1)
    rows = "".join(
        f'<rect id="mm-{v.index}" y="{v.index}" width="1" height="1" '
        f'fill="{colours.get(v.device, "#eee")}"/>'
        for v in views
    )
    cuts = "".join(f'<line x1="0" x2="1" y1="{g.ops[0]}" y2="{g.ops[0]}"/>' for g in groups[1:])
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="minimap" viewBox="0 0 1 {n}" '
        f'preserveAspectRatio="none"><title>overview: click to jump</title>{rows}{cuts}'
        f'<rect id="mm-view" x="0" y="0" width="1" height="{n}"/></svg>'
    )


def _ops_data(groups: list[Group], views: list[_View], names: list[str | None]) -> str:
    """The search index (per op: index, group, lower-case text) as JSON, `</` escaped."""
    group_of = {i: g.index for g in groups for i in g.ops}
    data = []
    for v in views:
        words = [f"#{v.index}", v.title, v.signature, v.device, *(v.rows[0][:1] if v.rows else ())]
        words += [names[v.index] or ""]
        data.append({"i": v.index, "g": group_of[v.index], "hay": " ".join(words).lower()})
    return json.dumps(data, ensure_ascii=False).replace("</", "<\\/")


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
        f'<details id="op-{v.index}" class="op-d"{" open" if open_ else ""}><summary>#{v.index} '
        f"{_esc(v.title)} {_esc(v.signature)} @{_esc(v.device)}</summary>"
        f'<table class="c"><tr>{head}</tr>{"".join(body)}</table>'
        f'<p class="why"><b>why:</b> {_esc(v.why)}</p></details>'
    )


def _group_block(group: Group, svg: str, height: float, head: str, open_: bool) -> str:
    """A group in the graph pane: a header bar (toggles it) over its SVG."""
    g, first, last = group.index, group.ops[0], group.ops[-1]
    return (
        f'<div class="grp" data-g="{g}" data-ops="[{first},{last}]" '
        f'data-h="{GROUP_HEAD_H + (height if open_ else 0):.0f}">'
        f'<button class="gh" id="gh-{g}"><span>{"▾ " if open_ else "▸ "}</span>{_esc(head)}'
        f'<span class="hits"></span></button><div class="gb" id="gb-{g}"'
        f"{'' if open_ else ' hidden'}>\n{svg}\n</div></div>"
    )


def _group_list(group: Group, head: str, details: list[str], open_: bool) -> str:
    """A group in the list pane: a `<details>` around its ops' sections."""
    return (
        f'<details class="lg" id="lg-{group.index}"{" open" if open_ else ""}>'
        f"<summary>{_esc(head)}</summary>\n" + "\n".join(details) + "\n</details>"
    )


def _panes(
    g: _Graph,
    views: list[_View],
    edges: list[_Edge],
    colours: dict[str, str],
    default: str,
    op_index: int | None,
) -> tuple[str, str, str, str]:
    """The minimap, graph pane, list pane and search data, grouped (see tools/explain_groups.py);
    a large plan starts collapsed, except the group of `op_index`."""
    plan, by_index = g.plan, {i: op for op, i in g.index.items()}
    names = [op_name(by_index[v.index]) for v in views]
    groups = group_ops(names)
    args = _block_args(plan.order[0]) if plan.order else ()
    fn = plan.order[0].parent_op() if plan.order else None
    ins = io_names(fn)[0] if isinstance(fn, func.FuncOp) else [str(k) for k in range(len(args))]
    pane, lists = [], []
    for grp in groups:
        open_ = len(views) <= EXPAND_ALL_MAX or op_index in grp.ops
        svg, height = _render_svg(grp, views, edges, ins, colours, default)
        head = _group_head(grp, views)
        pane.append(_group_block(grp, svg, height, head, open_))
        details = [_details(views[i], i == op_index) for i in grp.ops]
        lists.append(_group_list(grp, head, details, open_))
    return (
        _minimap(groups, views, colours),
        "\n".join(pane),
        "\n".join(lists),
        _ops_data(groups, views, names),
    )


def explain_html(
    plan: ExecutionPlan,
    module_name: str,
    options: PlanOptions,
    *,
    judge_label: str | None = None,
    op_index: int | None = None,
) -> str:
    """One self-contained page: header, device legend, search box, a minimap, the graph as SVG
    in collapsible groups (click a node for its candidates) and a `<details>` section per
    decision point (`op_index` opens that one and its group)."""
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
    minimap, pane, lists, data = _panes(g, views, edges, colours, options.default_device, op_index)
    hash_js = f"location.hash='#op-{op_index}';" if op_index is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>fuel explain: {_esc(module_name)}</title><style>{CSS}</style></head>
<body><header><h1>fuel explain: {_esc(module_name)}</h1><table>{rows}</table>
<div class="legend" id="legend">{legend}</div>
<div class="tools"><input id="q" type="search" placeholder="search ops: name, kernel, device"
 aria-label="search ops"><button id="qprev" title="previous match">↑</button><button
 id="qnext" title="next match (Enter)">↓</button> <span id="qn"></span>
<button id="zout">−</button><button id="zin">+</button><button id="zfit"
 title="fit the width, never below a readable zoom">fit</button>
<button id="all">expand all</button><button id="none">collapse all</button></div></header>
<main>{minimap}<div id="pane">
{pane}
</div><div id="list">
{lists}
</div></main>
<script type="application/json" id="ops-data">{data}</script>
<script>{hash_js}{JS}</script></body></html>
"""
