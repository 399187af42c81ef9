"""The inline CSS and script of the `fuel explain` HTML page (tools/explain_html.py).

Kept apart so the renderer stays readable; the script is checked for syntax by
`node --check` in tests/tools/test_explain.py where node is installed.
"""

from __future__ import annotations

GROUP_HEAD_H = 28
"""Height in px of a group's header bar in the graph pane (a collapsed group is just this)."""

MIN_ZOOM = 0.8
"""Zoom floor: the smallest SVG text (11px) stays >= 8.8px on screen; 'fit' stops here."""

SVG_CSS = """
.edge{fill:none;stroke:#999;stroke-width:1.3}
.edge.xdev{stroke:#d62728;stroke-width:2}
.xlabel,.halo{font-size:11px;fill:#d62728}
.halo{stroke:#fff;stroke-width:3px}
.op text,.io text{font-size:12px;text-anchor:middle;pointer-events:none}
.op text.sub{font-size:11px;fill:#444}
.op rect{stroke:#555;stroke-width:1}
.op:hover rect,.op.sel rect{stroke:#000;stroke-width:3}
.op.hit rect{stroke:#e6a700;stroke-width:4}
.io rect{stroke:#888;stroke-dasharray:2 2}
.port{cursor:pointer}
"""
"""SVG rules live inside each <svg> so a graph renders the same when saved on its own."""

CSS = (
    """
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
.tools{margin-top:6px}
#q{width:22em}
main{display:flex;flex:1;min-height:0}
#minimap{flex:0 0 30px;border-right:1px solid #ccc;background:#f4f4f4;cursor:pointer;
         display:block;height:100%}
#minimap .hit{fill:#000}
#mm-view{fill:rgba(0,0,0,.12);stroke:#000;stroke-width:1;vector-effect:non-scaling-stroke}
#minimap line{stroke:#fff;vector-effect:non-scaling-stroke}
#pane{flex:1 1 50%;overflow:auto;position:relative;border-right:1px solid #ccc;background:#fff}
.gh{display:block;width:100%;height:"""
    + str(GROUP_HEAD_H)
    + """px;box-sizing:border-box;text-align:left;border:0;
    border-bottom:1px solid #ddd;background:#f7f7f7;font:12.5px system-ui,sans-serif;
    cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;margin:0}
.gh:hover{background:#eee}
.gh .hits{color:#b07b00;font-weight:600}
#list{flex:1 1 50%;overflow:auto;padding:8px 12px}
details{border:1px solid #ddd;border-radius:4px;margin:4px 0;padding:2px 8px}
details[open]{background:#fcfcfc}
details.sel{outline:2px solid #333}
details.hit>summary{background:#fff3c4}
details.lg>summary{font-family:system-ui,sans-serif;font-weight:600}
summary{cursor:pointer;font-family:ui-monospace,monospace;font-size:12.5px}
table.c{border-collapse:collapse;margin:6px 0;font-size:12.5px}
table.c th,table.c td{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}
table.c td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.winner td{font-weight:600;background:#eef7ee}
tr.rejected td,tr.other td{color:#777}
.why{margin:4px 0 6px;font-size:13px}
button{margin-left:6px}
"""
)

JS = (
    """
(function(){
  var MIN_ZOOM="""
    + str(MIN_ZOOM)
    + """;
  var ops=JSON.parse(document.getElementById('ops-data').textContent);
  var N=ops.length, pane=document.getElementById('pane');
  var mm=document.getElementById('minimap'), mmView=document.getElementById('mm-view');
  var zoom=1, svgs=[].slice.call(document.querySelectorAll('svg.graph'));
  svgs.forEach(function(s){s.dataset.w=s.getAttribute('width');
    s.dataset.h=s.getAttribute('height');});
  function $(id){return document.getElementById(id);}
  function setZoom(z){zoom=Math.max(MIN_ZOOM,Math.min(4,z));
    svgs.forEach(function(s){s.setAttribute('width',s.dataset.w*zoom);
      s.setAttribute('height',s.dataset.h*zoom);});
    updateView();}
  $('zin').onclick=function(){setZoom(zoom*1.25)};
  $('zout').onclick=function(){setZoom(zoom/1.25)};
  $('zfit').onclick=function(){
    var w=0; svgs.forEach(function(s){if(!s.parentNode.hidden){w=Math.max(w,+s.dataset.w);}});
    if(w){setZoom(pane.clientWidth/w);}};
  function setGroup(g,open){
    var b=$('gb-'+g), l=$('lg-'+g), h=$('gh-'+g);
    if(b){b.hidden=!open;} if(l){l.open=open;}
    if(h){h.firstChild.textContent=open?'\\u25be ':'\\u25b8 ';}}
  var groups=[].slice.call(document.querySelectorAll('.grp'));
  groups.forEach(function(el){var g=el.dataset.g;
    $('gh-'+g).onclick=function(){setGroup(g,$('gb-'+g).hidden);updateView();};});
  $('all').onclick=function(){groups.forEach(function(el){setGroup(el.dataset.g,true)});
    updateView();};
  $('none').onclick=function(){groups.forEach(function(el){setGroup(el.dataset.g,false)});
    updateView();};
  function select(i){
    var op=ops[i]; if(!op){return;}
    setGroup(op.g,true);
    document.querySelectorAll('.sel').forEach(function(e){e.classList.remove('sel')});
    var d=$('op-'+i), n=$('node-'+i);
    if(d){d.open=true;d.classList.add('sel');d.scrollIntoView({block:'nearest'});}
    if(n){n.classList.add('sel');n.scrollIntoView({block:'center',inline:'center'});}
    updateView();
  }
  document.querySelectorAll('.op,.port').forEach(function(n){
    n.addEventListener('click',function(ev){ev.preventDefault();
      history.replaceState(null,'','#op-'+n.dataset.i);select(+n.dataset.i);});});
  document.querySelectorAll('details.op-d>summary').forEach(function(s){
    s.addEventListener('click',function(){var i=+s.parentNode.id.slice(3);
      setGroup(ops[i].g,true);var n=$('node-'+i);
      if(n){n.scrollIntoView({block:'center',inline:'center'});}});});
  // minimap: one row per op in program order; the box marks the ops the pane shows
  function opAt(y){
    for(var k=0;k<groups.length;k++){var el=groups[k], top=el.offsetTop;
      if(y<top+el.offsetHeight||k==groups.length-1){
        var ids=JSON.parse(el.dataset.ops), f=(y-top)/Math.max(1,el.offsetHeight);
        f=Math.max(0,Math.min(1,f));
        return ids[0]+f*(ids[1]-ids[0]+1);}}
    return 0;}
  function updateView(){
    if(!N){return;}
    var a=opAt(pane.scrollTop), b=opAt(pane.scrollTop+pane.clientHeight);
    mmView.setAttribute('y',a);mmView.setAttribute('height',Math.max(b-a,N/200));}
  pane.addEventListener('scroll',updateView);
  window.addEventListener('resize',updateView);
  mm.addEventListener('click',function(ev){
    var r=mm.getBoundingClientRect();
    var i=Math.floor((ev.clientY-r.top)/Math.max(1,r.height)*N);
    select(Math.max(0,Math.min(N-1,i)));});
  // search: highlight matching ops everywhere, filter the list, Enter/arrows jump
  var hits=[], at=-1, q=$('q');
  function search(){
    var s=q.value.trim().toLowerCase(), per={};
    hits=[];at=-1;
    ops.forEach(function(op){
      var hit=s!==''&&op.hay.indexOf(s)>=0;
      if(hit){hits.push(op.i);per[op.g]=(per[op.g]||0)+1;}
      var n=$('node-'+op.i), d=$('op-'+op.i), m=$('mm-'+op.i);
      if(n){n.classList.toggle('hit',hit);}
      if(d){d.classList.toggle('hit',hit);d.hidden=s!==''&&!hit;}
      if(m){m.classList.toggle('hit',hit);}});
    groups.forEach(function(el){var g=el.dataset.g;
      $('gh-'+g).querySelector('.hits').textContent=per[g]?' \\u2014 '+per[g]+' match':'';
      var l=$('lg-'+g); if(l){l.hidden=s!==''&&!per[g];}});
    $('qn').textContent=s?hits.length+' match'+(hits.length==1?'':'es'):'';}
  function jump(step){if(!hits.length){return;}
    at=(at+step+hits.length)%hits.length;select(hits[at]);
    $('qn').textContent=(at+1)+' / '+hits.length;}
  q.addEventListener('input',search);
  q.addEventListener('keydown',function(ev){
    if(ev.key==='Enter'){ev.preventDefault();jump(ev.shiftKey?-1:1);}});
  $('qnext').onclick=function(){jump(1)};
  $('qprev').onclick=function(){jump(-1)};
  updateView();
  var m=/^#op-(\\d+)$/.exec(location.hash); if(m){select(+m[1]);}
})();
"""
)
