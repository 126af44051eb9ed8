"""The pipeline report as one self-contained HTML page (or a notebook fragment).

Everything is inline — styles, script and the report's JSON — so the file
works from ``file://`` with no server and no network. The page shows a
summary, then the pipeline as a timeline: one row per pass run or skipped,
coloured by the phase the module is in after it, transitions marked, pass
and verifier times drawn to scale. A row opens to the pass's diff (unified
or side by side, hunks grouped by function, filterable by function name),
its diagnostics with the offending IR line highlighted, or the error that
stopped the pipeline. Rows of passes that changed nothing are greyed. Detail
is rendered only when a row is opened, so a report of a 10,000-binding
module stays responsive.
"""

from __future__ import annotations

import html
import json

from phasec.explorer.model import ReportDoc

__all__ = ["render_html", "render_fragment", "inline_json", "PHASE_COLOURS"]

#: phase label -> colour of its timeline rows (also the legend)
PHASE_COLOURS = {"ingestion": "#4e79a7", "optimization": "#59a14f", "lowering": "#f28e2b",
                 "build": "#b07aa1"}

_CSS = """
.phr{font:14px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;color:#1d1d1f;max-width:1200px}
.phr h1{font-size:20px;margin:8px 0}
.phr .summary{display:flex;flex-wrap:wrap;gap:8px 24px;margin:8px 0 12px}
.phr .summary div b{display:block;font-size:18px}
.phr .legend span{display:inline-block;margin-right:14px}
.phr .legend i{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:4px;
 vertical-align:-1px}
.phr .error{border:1px solid #c62828;background:#fdecea;padding:8px 12px;margin:8px 0;
 border-radius:4px;white-space:pre-wrap}
.phr .controls{margin:8px 0;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
.phr table{border-collapse:collapse;width:100%;table-layout:fixed}
.phr td.name{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.phr tr.detail pre{max-height:70vh;overflow:auto}
.phr tr.step>td{border-top:1px solid #e3e3e3;padding:3px 6px;vertical-align:middle}
.phr tr.step>td:first-child{border-left:5px solid var(--phase)}
.phr tr.step{cursor:pointer}
.phr tr.step:hover{background:#f5f7fb}
.phr tr.unchanged td.name,.phr tr.skipped td{color:#9a9a9a}
.phr tr.failed td.name{color:#c62828;font-weight:600}
.phr td.phase span{display:inline-block;padding:1px 7px;border-radius:9px;color:#fff;
 font-size:12px}
.phr td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.phr .bar{position:relative;height:12px;min-width:240px}
.phr .bar i{position:absolute;top:0;height:12px;border-radius:2px}
.phr .bar i.v{opacity:.45}
.phr .badge{font-size:11px;padding:0 5px;border:1px solid currentColor;border-radius:8px;
 margin-left:6px}
.phr tr.detail>td{padding:6px 10px 14px 28px;background:#fafafa}
.phr pre{margin:4px 0;font:12px/1.35 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
 overflow-x:auto}
.phr .fn{font-weight:600;margin-top:8px}
.phr .del{background:#ffebe9}.phr .add{background:#e6ffec}.phr .hunk{color:#6f42c1}
.phr .sbs{display:grid;grid-template-columns:1fr 1fr;gap:6px}
.phr .diag{border-left:3px solid #c62828;padding:4px 8px;margin:6px 0;background:#fff}
.phr .diag code{font-weight:600}
.phr .hl{background:#ffd54f}
.phr .limits{border:1px solid #b0bec5;background:#eceff1;padding:6px 12px;margin:8px 0;
 border-radius:4px}
"""

_JS = r"""
(function(){
const root=document.getElementById(ROOT_ID);
const R=JSON.parse(root.querySelector('script.phr-data').textContent);
const COLOURS=PHASE_COLOURS_JSON;
const esc=s=>String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
const ms=s=>(s*1e3).toFixed(3);
let mode='unified', filter='';
function phaseBadge(p){return '<span style="background:'+COLOURS[p]+'">'+esc(p)+'</span>';}
function diffHTML(step){
  const parts=[];
  for(const fd of step.diff){
    if(filter && !fd.function.includes(filter)) continue;
    parts.push('<div class="fn">'+esc(fd.function||'(module)')+'</div>');
    if(mode==='unified'){
      parts.push('<pre>'+fd.lines.map(l=>{const c=l[0]==='-'?'del':l[0]==='+'?'add':l[0]==='@'?'hunk':'';
        return '<div class="'+c+'">'+esc(l)+'</div>';}).join('')+'</pre>');
    } else {
      const left=[],right=[];
      for(const l of fd.lines){
        if(l[0]==='@'){left.push('<div class="hunk">'+esc(l)+'</div>');right.push('<div class="hunk">&nbsp;</div>');}
        else if(l[0]==='-'){left.push('<div class="del">'+esc(l.slice(1))+'</div>');}
        else if(l[0]==='+'){right.push('<div class="add">'+esc(l.slice(1))+'</div>');}
        else {while(left.length<right.length)left.push('<div>&nbsp;</div>');
              while(right.length<left.length)right.push('<div>&nbsp;</div>');
              left.push('<div>'+esc(l.slice(1))+'</div>');right.push('<div>'+esc(l.slice(1))+'</div>');}
      }
      parts.push('<div class="sbs"><pre>'+left.join('')+'</pre><pre>'+right.join('')+'</pre></div>');
    }
  }
  if(!parts.length) return step.diff.length?'<p>No change in the functions matching the filter.</p>':'';
  return parts.join('');
}
function excerpt(textIndex,line){
  if(textIndex==null||line==null) return '';
  const lines=R.texts[textIndex].split('\n');
  const lo=Math.max(0,line-6), hi=Math.min(lines.length,line+5), out=[];
  for(let i=lo;i<hi;i++){const n=i+1;
    out.push('<div'+(n===line?' class="hl"':'')+'>'+String(n).padStart(5)+'  '+esc(lines[i])+'</div>');}
  return '<pre>'+out.join('')+'</pre>';
}
function diagHTML(d){
  return '<div class="diag"><code>'+esc(d.code)+'</code> '+esc(d.message)+
    (d.function?' <i>(function '+esc(d.function)+(d.binding?', binding '+esc(d.binding):'')+')</i>':'')+
    (d.source?' <small>at '+esc(d.source)+'</small>':'')+
    (d.help?'<div>help: '+esc(d.help)+'</div>':'')+excerpt(d.text,d.line)+'</div>';
}
function detailHTML(step){
  const out=[];
  if(step.status==='skipped') out.push('<p>Skipped: '+esc(step.reason)+'</p>');
  if(step.status==='failed') out.push('<p class="error">'+esc(step.reason)+'</p>');
  for(const d of step.diagnostics) out.push(diagHTML(d));
  if(step.changed&&step.diff_note) out.push('<p class="limits">'+esc(step.diff_note)+'</p>');
  else if(step.changed) out.push(diffHTML(step));
  else if(step.status==='ran') out.push('<p>The pass changed nothing.</p>');
  return out.join('')||'<p>Nothing to show.</p>';
}
function render(){
  const max=Math.max(1e-9,...R.steps.map(s=>s.seconds+s.verify_seconds));
  const rows=[];
  for(const s of R.steps){
    const cls=['step',s.status,(s.status==='ran'&&!s.changed)?'unchanged':'changed'].join(' ');
    const colour=COLOURS[s.phase_after];
    const w1=100*s.seconds/max, w2=100*s.verify_seconds/max;
    rows.push('<tr class="'+cls+'" data-index="'+s.index+'" data-phase="'+s.phase_after+
      '" style="--phase:'+colour+'">'+
      '<td class="num">'+(s.index+1)+'</td>'+
      '<td class="name">'+esc(s.pass)+(s.transition?' <span class="badge">&rarr; '+esc(s.phase_after)+'</span>':'')+
        (s.required_by?' <small>(required by '+esc(s.required_by)+')</small>':'')+
        (s.status==='skipped'?' <small>skipped</small>':'')+(s.status==='failed'?' <small>FAILED</small>':'')+
        (s.diagnostics.length?' <small>'+s.diagnostics.length+' diagnostic(s)</small>':'')+'</td>'+
      '<td class="phase">'+phaseBadge(s.phase_after)+'</td>'+
      '<td class="num">'+ms(s.seconds)+'</td>'+
      '<td class="num">'+(s.verify==='checked'?ms(s.verify_seconds):s.verify==='cached'?'cached':'-')+'</td>'+
      '<td><div class="bar"><i style="left:0;width:'+w1+'%;background:'+colour+'"></i>'+
        '<i class="v" style="left:'+w1+'%;width:'+w2+'%;background:'+colour+'"></i></div></td></tr>');
  }
  if(!rows.length) rows.push('<tr><td colspan="6"><p>No pass ran.</p></td></tr>');
  root.querySelector('tbody').innerHTML=rows.join('');
  const diags=root.querySelector('.diags');
  if(diags&&R.error) diags.innerHTML=R.error.diagnostics.map(diagHTML).join('');
}
root.querySelector('tbody').addEventListener('click',ev=>{
  const tr=ev.target.closest('tr.step'); if(!tr) return;
  const next=tr.nextElementSibling;
  if(next&&next.classList.contains('detail')){next.remove();return;}
  const d=document.createElement('tr'); d.className='detail';
  d.innerHTML='<td colspan="6">'+detailHTML(R.steps[+tr.dataset.index])+'</td>';
  tr.after(d);
});
function refreshOpen(){root.querySelectorAll('tr.detail').forEach(d=>{
  const s=R.steps[+d.previousElementSibling.dataset.index]; d.firstChild.innerHTML=detailHTML(s);});}
root.querySelector('.mode').addEventListener('change',ev=>{mode=ev.target.value;refreshOpen();});
root.querySelector('.filter').addEventListener('input',ev=>{filter=ev.target.value.trim();refreshOpen();});
root.querySelector('.expand').addEventListener('click',()=>{
  root.querySelectorAll('tr.step.changed:not(.skipped),tr.step.failed').forEach(tr=>{
    const n=tr.nextElementSibling; if(!(n&&n.classList.contains('detail'))) tr.click();});});
render();
})();
"""


def _summary_html(doc: ReportDoc) -> str:
    s = doc.summary
    cells = [("final phase", s.final_phase), ("phases reached", " → ".join(s.phases_reached)),
             ("passes run", s.passes_run), ("skipped", s.passes_skipped),
             ("changed", s.passes_changed), ("failed", s.passes_failed),
             ("kernels", s.kernels), ("pass time", f"{s.total_seconds * 1e3:.2f} ms"),
             ("verifier time", f"{s.verify_seconds * 1e3:.2f} ms")]
    return "".join(f"<div>{html.escape(k)}<b>{html.escape(str(v))}</b></div>" for k, v in cells)


def _size(nbytes: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} B"


def _limits_html(doc: ReportDoc) -> str:
    """What the report's size limits left out, when they applied."""
    lim = doc.limits
    if lim is None or not lim.applied:
        return ""
    parts = []
    if lim.constants_elided:
        parts.append(f"{lim.constants_elided} constants of more than {lim.constant_elements} "
                     f"elements ({_size(lim.constant_bytes_elided)}) are shown as "
                     'metadata["relax.expr.Constant"][i], as TVM prints them; the comment at '
                     "the top of each module text gives their shape, dtype and digest")
    if lim.snapshots_cut:
        parts.append(f"{lim.snapshots_cut} module texts were cut at "
                     f"{lim.snapshot_chars:,} characters each")
    if lim.snapshots_omitted:
        parts.append(f"{lim.snapshots_omitted} module texts were left out: the report keeps at "
                     f"most {lim.report_chars:,} characters of module texts and diffs")
    if lim.diffs_omitted:
        parts.append(f"{lim.diffs_omitted} diffs are not shown (a module text was cut or left "
                     "out, or the report's budget was spent)")
    return (f'<div class="limits"><b>Size limits applied:</b> '
            f'{html.escape("; ".join(parts))}.</div>')


def _error_html(doc: ReportDoc) -> str:
    e = doc.error
    if e is None:
        return ""
    lines = [f"<b>{html.escape(e.kind)}</b>"
             + (f" in <b>{html.escape(e.pass_)}</b>" if e.pass_ else "")
             + f": {html.escape(e.message)}"]
    if e.phase_needed:
        lines.append(f"needs phase {html.escape(' or '.join(e.phase_needed))}; the module is "
                     f"in {html.escape(e.module_phase or '?')}")
    if e.fix:
        lines.append(f"fix: {html.escape(e.fix)}")
    return (f'<div class="error">{"<br>".join(lines)}</div>'
            + ('<div class="diags"></div>' if e.diagnostics else ""))


#: Characters that could end the inline data (``</script>``), open a comment
#: that swallows the rest of the page (``<!--<script``), or be read as a line
#: end by older JavaScript parsers: written as JSON ``\uXXXX`` escapes instead.
_INLINE_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                   "\u2028": "\\u2028", "\u2029": "\\u2029"}


def inline_json(text: str) -> str:
    """JSON text made safe inside ``<script type="application/json">``: no
    string in it can change how the page parses, and it reads back as the
    same JSON (the characters escaped only ever occur inside strings)."""
    for char, escape in _INLINE_ESCAPES.items():
        text = text.replace(char, escape)
    return text


def render_fragment(doc: ReportDoc, element_id: str = "phasec-report") -> str:
    """The report as an HTML fragment (a notebook cell output): a ``div`` with
    its own styles, data and script, scoped by ``element_id``."""
    data = inline_json(doc.model_dump_json(by_alias=True))
    legend = "".join(f'<span><i style="background:{c}"></i>{p}</span>'
                     for p, c in PHASE_COLOURS.items())
    script = (_JS.replace("ROOT_ID", json.dumps(element_id))
              .replace("PHASE_COLOURS_JSON", json.dumps(PHASE_COLOURS)))
    return (f'<div class="phr" id="{html.escape(element_id)}"><style>{_CSS}</style>'
            f'<script type="application/json" class="phr-data">{data}</script>'
            f"<h1>phasec pipeline: {html.escape(doc.title)}</h1>"
            f'<div class="summary">{_summary_html(doc)}</div>'
            f'<div class="legend">phase after the pass: {legend}</div>{_limits_html(doc)}'
            f'{_error_html(doc)}'
            '<div class="controls"><label>diff <select class="mode">'
            '<option value="unified">unified</option><option value="split">side by side'
            '</option></select></label><label>function filter <input class="filter" '
            'placeholder="name"></label><button class="expand" type="button">open every '
            'change</button><span>click a pass to open it; grey rows changed nothing</span>'
            "</div><table><colgroup><col style=\"width:4em\"><col style=\"width:34%\">"
            "<col style=\"width:9em\"><col style=\"width:7em\"><col style=\"width:7em\"><col>"
            "</colgroup><thead><tr><th>#</th><th>pass</th><th>phase</th><th>time (ms)</th>"
            "<th>verify (ms)</th><th>time to scale (solid: pass, light: verifier)</th></tr>"
            f"</thead><tbody></tbody></table><script>{script}</script></div>")


def render_html(doc: ReportDoc) -> str:
    """The report as a complete, self-contained HTML document."""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>phasec pipeline: {html.escape(doc.title)}</title></head><body>"
            f"{render_fragment(doc)}</body></html>\n")
