// The unienv-remote viewer page. Plain modern JavaScript, no build step.
//
// The viewer (the Rust process that served this page) is a client of a
// UniEnv server; this page talks only to the viewer, over /ws. Each panel is
// one subscription. The page grants the viewer one credit ("ready") per
// panel after drawing a snapshot, so a busy or paused tab receives fewer
// snapshots instead of queueing them: latest wins.
"use strict";

const MAX_POINTS = 600;
// Plots and the stats line are redrawn at most this often (ms); images every
// frame. Redrawing every plot 60 times a second costs a tab without a GPU
// more CPU than everything else together.
const PLOT_INTERVAL = 100;
const STATS_INTERVAL = 250;
// The timeline: each panel keeps its last HISTORY boundaries (their values
// share the received message's buffer), `?history=N` sets it (10 to 2000).
const PAGE_PARAMS = new URLSearchParams(location.search);
const HISTORY = Math.min(2000, Math.max(10, Number(PAGE_PARAMS.get("history")) || 200));
const PALETTE = ["#2463d6", "#d6336c", "#2e7d32", "#b26a00", "#6f42c1", "#00838f",
  "#c62828", "#5d4037", "#455a64", "#9e9d24", "#ad1457", "#1565c0", "#ef6c00", "#4527a0",
  "#00695c", "#37474f"];

const $ = (sel) => document.querySelector(sel);
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

// A resource id that wraps at its separators (`/`, `_`, `.`, `-`, `:`)
// rather than inside a word.
function idNode(id) {
  const span = el("span");
  for (const part of id.split(/(?<=[/_.:-])/)) span.append(part, el("wbr"));
  return span;
}

// What in a descriptor, when it changes, needs the user's attention.
const DESCRIPTOR_KEYS = ["action_space", "observation_space", "context_space", "metadata", "batch_size", "render_mode"];
function descriptorSignature(d) {
  return DESCRIPTOR_KEYS.map((k) => JSON.stringify(d[k] ?? null));
}

// ---- wire format (see src/viewer/frame.rs) ----

function decode(buffer) {
  const n = new DataView(buffer).getUint32(0);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, n)));
  const start = Math.ceil((4 + n) / 8) * 8;
  return { header, blob: { buffer, start } };
}

function revive(v, blob) {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.map((x) => revive(x, blob));
  if (v.$nd) {
    const m = v.$nd;
    const at = blob.start + m.offset;
    const Kind = m.type === "u8" ? Uint8Array : m.type === "f32" ? Float32Array : Float64Array;
    return { nd: true, dtype: m.dtype, shape: m.shape, data: new Kind(blob.buffer, at, m.length) };
  }
  if ("$float" in v) return v.$float === "nan" ? NaN : v.$float === "inf" ? Infinity : -Infinity;
  if (v.$tuple) return v.$tuple.map((x) => revive(x, blob));
  if ("$bytes" in v) return { bytes: v.$bytes };
  if (v.$object) return { object: v.$object.shape, values: revive(v.$object.values, blob) };
  if (v.$graph) return { graph: revive(v.$graph, blob) };
  const out = {};
  for (const [k, x] of Object.entries(v)) out[k] = revive(x, blob);
  return out;
}

function isPlainObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !v.nd && !("bytes" in v);
}

function fmtNum(x) {
  if (typeof x === "boolean") return x ? "True" : "False";
  if (typeof x !== "number") return String(x);
  if (Number.isInteger(x)) return String(x);
  return Math.abs(x) >= 1e5 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(3) : x.toFixed(4);
}

function summary(v) {
  if (v === null || v === undefined) return "None";
  if (typeof v !== "object") return fmtNum(v);
  if (v.nd) {
    const { data, dtype, shape } = v;
    if (data.length <= 8) {
      const items = Array.from(data, (x) => dtype === "bool" ? fmtNum(!!x) : fmtNum(x));
      return `${dtype}[${shape.join(",")}] [${items.join(", ")}]`;
    }
    let lo = Infinity, hi = -Infinity, sum = 0;
    for (const x of data) { if (x < lo) lo = x; if (x > hi) hi = x; sum += x; }
    return `${dtype}[${shape.join(",")}] min ${fmtNum(lo)} max ${fmtNum(hi)} mean ${fmtNum(sum / data.length)}`;
  }
  if ("bytes" in v) return `bytes(${v.bytes})`;
  if (Array.isArray(v)) return `(${v.map(summary).join(", ")})`;
  if (v.object) return `object[${v.object.join(",")}]`;
  if (v.graph) return "graph";
  return "{" + Object.entries(v).map(([k, x]) => `${k}: ${summary(x)}`).join(", ") + "}";
}

function spaceSummary(s) {
  if (s === null || s === undefined) return "—";
  if (typeof s !== "object") return String(s);
  const type = s.type || s.space_type || "space";
  if (s.spaces && isPlainObject(s.spaces) && !Array.isArray(s.spaces)) {
    return `${type}{` + Object.entries(s.spaces).map(([k, x]) => `${k}: ${spaceSummary(x)}`).join(", ") + "}";
  }
  if (Array.isArray(s.spaces)) return `${type}(${s.spaces.map(spaceSummary).join(", ")})`;
  const parts = [];
  if (s.dtype) parts.push(s.dtype);
  if (s.shape) parts.push(`(${[].concat(s.shape).join(",")})`);
  if (s.n !== undefined) parts.push(`n=${s.n}`);
  return `${type}(${parts.join(", ")})`;
}

// Image fields: (..., H, W, C) with C in 1, 3, 4, or a large 2-D array.
function imageGeometry(v) {
  if (!v || !v.nd || v.dtype === "bool") return null;
  const s = v.shape;
  if (s.length >= 3 && [1, 3, 4].includes(s[s.length - 1]) && s[s.length - 2] >= 4 && s[s.length - 3] >= 4) {
    const [h, w, c] = s.slice(-3);
    return { h, w, c, n: s.slice(0, -3).reduce((a, b) => a * b, 1) };
  }
  if (s.length === 2 && s[0] >= 16 && s[1] >= 16) return { h: s[0], w: s[1], c: 1, n: 1 };
  return null;
}

function numericComponents(v) {
  if (typeof v === "number") return [v];
  if (typeof v === "boolean") return [v ? 1 : 0];
  if (v && v.nd && v.data.length >= 1 && v.data.length <= 16) return Array.from(v.data, Number);
  if (Array.isArray(v) && v.length >= 1 && v.length <= 16 && v.every((x) => typeof x === "number" || typeof x === "boolean")) {
    return v.map(Number);
  }
  return null;
}

function anyTrue(v) {
  if (typeof v === "boolean") return v;
  if (v && v.nd) return v.data.some((x) => x);
  if (Array.isArray(v)) return v.some(anyTrue);
  return false;
}

// ---- widgets ----

class ImageWidget {
  constructor(path, geo) {
    this.kind = `image:${geo.h}x${geo.w}x${geo.c}x${geo.n}`;
    this.geo = geo;
    this.cols = Math.ceil(Math.sqrt(geo.n));
    this.rows = Math.ceil(geo.n / this.cols);
    this.canvas = el("canvas", { class: "image", "data-field": path });
    this.canvas.width = this.cols * geo.w;
    this.canvas.height = this.rows * geo.h;
    const scale = Math.max(1, Math.floor(Math.min(300 / this.canvas.width, 200 / this.canvas.height)));
    this.canvas.style.width = `${this.canvas.width * scale}px`;
    this.ctx = this.canvas.getContext("2d");
    this.image = this.ctx.createImageData(geo.w, geo.h);
    this.el = this.canvas;
  }
  update(v, seq) {
    const { h, w, c, n } = this.geo;
    const data = v.data;
    let scale = 1;
    if (v.dtype.startsWith("float")) {
      let hi = 0;
      for (let i = 0; i < data.length; i += 97) hi = Math.max(hi, data[i]);
      scale = hi <= 1.0 ? 255 : 1;
    }
    const px = this.image.data;
    const per = h * w * c;
    for (let b = 0; b < n; b++) {
      const base = b * per;
      for (let i = 0, j = 0; i < h * w; i++, j += 4) {
        const k = base + i * c;
        if (c === 1) {
          const g = data[k] * scale;
          px[j] = px[j + 1] = px[j + 2] = g;
          px[j + 3] = 255;
        } else {
          px[j] = data[k] * scale;
          px[j + 1] = data[k + 1] * scale;
          px[j + 2] = data[k + 2] * scale;
          px[j + 3] = c === 4 ? data[k + 3] * scale : 255;
        }
      }
      this.ctx.putImageData(this.image, (b % this.cols) * w, Math.floor(b / this.cols) * h);
    }
    this.canvas.dataset.sequence = String(seq);
  }
}

class PlotWidget {
  constructor(path, count, panel) {
    this.kind = `plot:${count}`;
    this.path = path;
    this.panel = panel;
    this.lastFlush = -Infinity;
    this.timer = null;
    this.data = [[]];
    for (let i = 0; i < count; i++) this.data.push([]);
    this.el = el("div", { class: "plot", "data-field": path, "data-points": "0" });
    const series = [{ label: "seq" }];
    for (let i = 0; i < count; i++) {
      series.push({ label: count === 1 ? path : `${path}[${i}]`, stroke: PALETTE[i % PALETTE.length], width: 1.25, points: { show: false } });
    }
    this.plot = new uPlot({
      width: 300, height: 110, series,
      scales: { x: { time: false } },
      legend: { show: count <= 6 },
      cursor: { drag: { x: false, y: false } },
      axes: [{ size: 28, font: "10px system-ui" }, { size: 44, font: "10px system-ui" }],
      hooks: { draw: [(u) => this.drawMarks(u)] },
    }, this.data, this.el);
  }
  push(seq, values) {
    this.data[0].push(seq);
    values.forEach((x, i) => this.data[i + 1].push(Number.isFinite(x) ? x : null));
    if (this.data[0].length > MAX_POINTS) for (const a of this.data) a.shift();
    this.dirty = true;
  }
  flush() {
    if (!this.dirty) return;
    const wait = this.lastFlush + PLOT_INTERVAL - performance.now();
    if (wait > 0) {
      if (!this.timer) this.timer = setTimeout(() => { this.timer = null; this.flush(); }, wait);
      return;
    }
    this.lastFlush = performance.now();
    this.dirty = false;
    this.plot.setData(this.data);
    this.el.dataset.points = String(this.data[0].length);
  }
  // terminated (red) and truncated (orange) boundaries as vertical lines
  // (every one the viewer counted, drawn frames or not), resets as ticks;
  // the timeline's cursor (when it is not on the latest) as a dashed one.
  drawMarks(u) {
    const ctx = u.ctx;
    const lo = this.data[0][0];
    const hi = this.data[0][this.data[0].length - 1];
    ctx.save();
    const cursor = this.panel.cursor;
    if (cursor !== null && cursor >= lo) {
      const x = u.valToPos(cursor, "x", true);
      ctx.strokeStyle = "#1d232b";
      ctx.lineWidth = 1 * devicePixelRatio;
      ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    // Resets: a short grey dashed tick at the top (expected revision
    // changes, quietly).
    ctx.strokeStyle = "#9aa3ad";
    ctx.lineWidth = 1 * devicePixelRatio;
    ctx.setLineDash([2 * devicePixelRatio, 2 * devicePixelRatio]);
    for (const seq of this.panel.resetMarks) {
      if (seq < lo || seq > hi) continue;
      const x = u.valToPos(seq, "x", true);
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height * 0.3);
      ctx.stroke();
    }
    ctx.setLineDash([]);
    ctx.lineWidth = 1.5 * devicePixelRatio;
    for (const [seq, kind] of this.panel.marks) {
      if (seq < lo || seq > hi) continue;
      const x = u.valToPos(seq, "x", true);
      ctx.strokeStyle = kind === "terminated" ? "#c62828" : "#ef8f00";
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    }
    ctx.restore();
  }
}

class TextWidget {
  constructor(path) {
    this.kind = "text";
    this.el = el("div", { class: "text", "data-field": path });
  }
  update(v) { this.el.textContent = summary(v); }
}

class TableWidget {
  constructor(path) {
    this.kind = "table";
    this.el = el("div", { class: "info", "data-field": path });
  }
  update(v) {
    const rows = [];
    const walk = (x, p) => {
      if (isPlainObject(x) && !x.object && !x.graph && Object.keys(x).length) {
        for (const [k, y] of Object.entries(x)) walk(y, p ? `${p}.${k}` : k);
      } else rows.push([p || "(value)", summary(x)]);
    };
    walk(v, "");
    const table = el("table");
    if (!rows.length) rows.push(["(empty)", ""]);
    for (const [k, s] of rows) table.append(el("tr", {}, el("td", { text: k }), el("td", { text: s })));
    this.el.replaceChildren(table);
  }
}

// ---- panels ----

let nextPanel = 1;
const panels = new Map();

class Panel {
  constructor(resource) {
    this.id = nextPanel++;
    this.resource = resource;
    this.paused = false;
    this.pending = null;
    this.widgets = new Map();
    // Episode ends ([seq, "terminated" | "truncated"]) and resets (seq),
    // each once (`markKeys`), whether this page drew their frame or the
    // viewer reported them with a later one.
    this.marks = [];
    this.resetMarks = [];
    this.markKeys = new Set();
    this.episodes = null;
    this.descSig = null;
    this.waitNote = null;
    this.arrivals = [];
    this.boundaries = [];
    this.received = 0;
    this.skipped = 0;
    this.sequence = null;
    this.revision = null;
    this.ended = false;
    // The timeline: recent boundaries, and the one shown (null: the latest).
    this.history = [];
    this.cursor = null;
    this.delays = [];
    this.pauseBtn = el("button", { text: "pause", onclick: () => this.togglePause() });
    this.scrub = el("input", { type: "range", min: "0", max: "0", value: "0", step: "1", class: "scrub",
      title: "Recent boundaries: drag to look back", oninput: () => this.seek(Number(this.scrub.value)) });
    this.cursorLabel = el("span", { class: "cursor-label", text: "" });
    this.followBtn = el("button", { text: "latest", title: "Follow the latest boundary", onclick: () => this.follow() });
    this.el = el("div", { class: "panel", "data-resource": resource, "data-panel": String(this.id) },
      el("div", { class: "panel-head" },
        el("span", { class: "title", title: resource }, idNode(resource)),
        this.pauseBtn,
        el("button", { text: "render", title: "Render at the next boundary", onclick: () => this.render() }),
        el("button", { text: "×", title: "Unsubscribe", onclick: () => this.close() })),
      this.stats = el("div", { class: "panel-stats", text: "subscribing…" }),
      el("div", { class: "timeline" },
        el("button", { text: "◀", title: "One boundary back", onclick: () => this.stepBy(-1) }),
        this.scrub,
        el("button", { text: "▶", title: "One boundary forward", onclick: () => this.stepBy(1) }),
        this.followBtn, this.cursorLabel),
      this.messages = el("div"),
      this.body = el("div"),
      this.renderBox = el("div", { class: "field", hidden: "" }));
    $("#panels").append(this.el);
    $("#empty").hidden = true;
    panels.set(this.id, this);
    this.subscribe();
  }
  subscribe() {
    send({ op: "subscribe", panel: this.id, resource: this.resource });
    if (!this.paused) send({ op: "ready", panel: this.id });
  }
  close() {
    send({ op: "unsubscribe", panel: this.id });
    panels.delete(this.id);
    this.el.remove();
    $("#empty").hidden = panels.size > 0;
  }
  render() {
    this.renderBox.hidden = false;
    const text = window.viewerState.inProcess ? "render…"
      : "render: waiting for the next boundary (a viewer's render is taken at the resource's next step or reset)…";
    this.renderBox.replaceChildren(el("div", { class: "field-name", text }));
    send({ op: "render", panel: this.id, resource: this.resource });
  }
  addMark(seq, kind) {
    const key = `${seq}:${kind}`;
    if (this.markKeys.has(key)) return;
    this.markKeys.add(key);
    if (kind === "reset") {
      this.resetMarks.push(seq);
      if (this.resetMarks.length > MAX_POINTS) this.resetMarks.splice(0, this.resetMarks.length - MAX_POINTS);
    } else {
      this.marks.push([seq, kind]);
      if (this.marks.length > MAX_POINTS) this.marks.splice(0, this.marks.length - MAX_POINTS);
    }
    this.el.dataset.endMarks = String(this.marks.length);
    this.el.dataset.resetMarks = String(this.resetMarks.length);
  }
  hasResetIn(after, upto) {
    return this.resetMarks.some((s) => s > after && s <= upto);
  }
  // Revision changes: a reset's (or reload's) is expected and only marked
  // on the timeline; a message is kept for what needs attention: changed
  // spaces or metadata, and a change no reset explains (a revival: the
  // resource rebuilt after idle eviction).
  noteRevision(revision, seq, kind, descriptor) {
    if (revision === undefined || revision === null) return;
    const sig = descriptor ? descriptorSignature(descriptor) : null;
    const from = this.revision;
    if (from !== null && revision !== from) {
      const changed = sig && this.descSig ? DESCRIPTOR_KEYS.filter((k, i) => sig[i] !== this.descSig[i]) : [];
      const skipped = this.sequence !== null && seq > this.sequence + 1;
      if (changed.length) {
        this.message(`descriptor changed at #${seq} (revision ${from} → ${revision}): ${changed.join(", ")}`, "warn");
      } else if (kind === "reset" || kind === "reload" || kind === "subscribed" || this.hasResetIn(this.sequence ?? 0, seq)) {
        if (kind === "reset" || kind === "reload") this.addMark(seq, "reset");
      } else if (skipped && !window.viewerState.inProcess) {
        // A remote server's viewer does not see the boundaries this page
        // skipped: most likely a reset among them.
      } else {
        this.message(`revision ${from} → ${revision} at #${seq} without a reset: the resource was revived (rebuilt after idle eviction) or reloaded`, "warn");
      }
    }
    this.revision = revision;
    if (sig) this.descSig = sig;
  }
  // No boundary yet: say why, and what will fill the panel.
  waitForFirst() {
    clearTimeout(this.waitTimer);
    this.waitTimer = setTimeout(() => {
      if (this.sequence !== null || this.ended || this.waitNote) return;
      const text = window.viewerState.inProcess
        ? `No boundary of ${this.resource} since the server started: the panel fills at its next step or reset (render shows it now).`
        : `Nothing to show yet: a viewer receives only the boundaries made after it subscribed, and ${this.resource} has not stepped since. The panel fills at its next step or reset. (A viewer in the server's process, serve --viewer, shows the last boundary at once.)`;
      this.waitNote = this.message(text, "info");
      this.el.dataset.waiting = "true";
      this.showStats();
    }, 1200);
  }
  togglePause() {
    this.paused = !this.paused;
    this.pauseBtn.textContent = this.paused ? "resume" : "pause";
    this.el.classList.toggle("paused", this.paused);
    if (!this.paused) {
      if (this.pending) schedule();
      else send({ op: "ready", panel: this.id });
    }
    this.showStats();
  }
  message(text, cls = "bad") {
    const m = el("div", { class: `msg ${cls}`, text });
    this.messages.append(m);
    while (this.messages.children.length > 3) this.messages.firstChild.remove();
    return m;
  }
  onSubscribed(h, descriptor) {
    this.ended = false;
    this.el.classList.remove("ended");
    this.messages.replaceChildren();
    this.waitNote = null;
    if (descriptor) {
      this.noteRevision(descriptor.revision, descriptor.sequence, "subscribed", descriptor);
      updateResource(descriptor);
    }
    if (this.sequence === null) this.waitForFirst();
    this.showStats();
  }
  onError(h) {
    this.ended = true;
    this.el.classList.add("ended");
    this.message(`${h.type === "ended" ? "ended" : "subscription_error"}: ${h.code ? h.code + ": " : ""}${h.message}`);
    this.showStats();
  }
  onSnapshot(h, data, descriptor) {
    const now = performance.now();
    this.received++;
    if (this.sequence !== null && h.sequence > this.sequence + 1) this.skipped += h.sequence - this.sequence - 1;
    this.el.dataset.skipped = String(this.skipped);
    // The viewer's marks since its previous frame (in the server's process
    // it sees every boundary), and its totals.
    for (const [s, k] of h.marks || []) this.addMark(s, k);
    if (h.episodes) this.episodes = h.episodes;
    this.noteRevision(h.revision, h.sequence, h.kind, descriptor);
    if (this.waitNote) {
      this.waitNote.remove();
      this.waitNote = null;
    }
    delete this.el.dataset.waiting;
    if (this.cachedNote) {
      this.cachedNote.remove();
      this.cachedNote = null;
    }
    if (h.cached) {
      const ago = h.idle_ms !== null && h.idle_ms !== undefined ? `, ${(h.idle_ms / 1000).toFixed(1)} s ago` : "";
      this.cachedNote = this.message(`The last boundary, #${h.sequence} (${h.kind}${ago}), from before this panel opened: the resource has not stepped since.`, "note");
      this.el.dataset.cached = String(h.sequence);
    }
    if (h.latest) {
      this.message(`Boundary #${h.latest} is the latest; this panel shows #${h.sequence}, the last one the viewer read (it reads four boundaries a second of a resource making more than 150 a second).`, "warn");
    }
    this.sequence = h.sequence;
    this.arrivals.push(now);
    this.boundaries.push([h.timestamp_ns / 1e9, h.sequence]);
    // Delivery latency: from the boundary (the server's clock) to this page.
    if (h.timestamp_ns) {
      this.delays.push(Date.now() - h.timestamp_ns / 1e6);
      if (this.delays.length > 20) this.delays.shift();
    }
    this.history.push({ seq: h.sequence, data });
    if (this.history.length > HISTORY) this.history.splice(0, this.history.length - HISTORY);
    while (this.arrivals.length > 1 && now - this.arrivals[0] > 1000) this.arrivals.shift();
    while (this.boundaries.length > 1 && h.timestamp_ns / 1e9 - this.boundaries[0][0] > 1) this.boundaries.shift();
    if (descriptor) updateResource(descriptor, h.sequence);
    this.lastKind = h.kind;
    this.gated = !!h.gated;
    this.apply(data, h.sequence);
    this.el.dataset.sequence = String(h.sequence);
    this.el.dataset.revision = String(h.revision);
    if (this.cursor !== null) this.showCursor();
    else this.el.dataset.shown = String(h.sequence);
    this.updateTimeline();
    this.showStats();
  }
  // ---- the timeline ----
  cursorIndex() {
    if (this.cursor === null) return this.history.length - 1;
    const i = this.history.findIndex((b) => b.seq >= this.cursor);
    return i < 0 ? this.history.length - 1 : i;
  }
  seek(index) {
    if (!this.history.length) return;
    const i = Math.max(0, Math.min(this.history.length - 1, index));
    if (i === this.history.length - 1 && !this.paused) return this.follow();
    this.cursor = this.history[i].seq;
    this.showCursor();
    this.updateTimeline();
  }
  stepBy(delta) {
    this.seek(this.cursorIndex() + delta);
  }
  follow() {
    this.cursor = null;
    const last = this.history[this.history.length - 1];
    if (last) this.showFields(last.data, last.seq, false);
    this.el.dataset.shown = last ? String(last.seq) : "";
    this.redrawPlots();
    this.updateTimeline();
  }
  // Frames, text and tables show the cursor's boundary; plots keep their
  // series and mark the cursor.
  showCursor() {
    const b = this.history[this.cursorIndex()];
    if (!b) return;
    this.cursor = b.seq;
    this.showFields(b.data, b.seq, false);
    this.el.dataset.shown = String(b.seq);
    this.redrawPlots();
  }
  redrawPlots() {
    for (const w of this.widgets.values()) if (w.plot) w.plot.redraw(false, false);
  }
  updateTimeline() {
    const n = this.history.length;
    const i = this.cursorIndex();
    this.scrub.max = String(Math.max(0, n - 1));
    this.scrub.value = String(Math.max(0, i));
    const live = this.cursor === null;
    this.followBtn.disabled = live;
    this.el.classList.toggle("scrubbing", !live);
    this.el.dataset.cursor = live ? "latest" : String(this.cursor);
    this.el.dataset.history = String(n);
    const b = this.history[i];
    this.cursorLabel.textContent = b ? `#${b.seq}${live ? " (latest)" : ` (${n - 1 - i} back)`}` : "";
  }
  apply(data, seq) {
    this.showFields(data, seq, true);
  }
  // Updates the widgets with a boundary's fields: plots gain its point when
  // `push` (a new boundary), other widgets show it.
  showFields(data, seq, push) {
    const fields = Object.entries(data);
    if (!push) {
      for (const [name, v] of fields) {
        if (name === "terminated" || name === "truncated") continue;
        if (name === "info") {
          const w = this.widgets.get(name);
          if (w && w.kind === "table") w.update(v);
          continue;
        }
        const walk = (path, x) => {
          if (isPlainObject(x) && !x.object && !x.graph) {
            for (const [k, y] of Object.entries(x)) walk(`${path}.${k}`, y);
            return;
          }
          const w = this.widgets.get(path);
          if (!w || w.push) return;
          if (w.kind.startsWith("image:")) {
            const geo = imageGeometry(x);
            if (geo && w.kind === `image:${geo.h}x${geo.w}x${geo.c}x${geo.n}`) w.update(x, seq);
          } else w.update(x);
        };
        walk(name, v);
      }
      return;
    }
    const signals = {};
    for (const [name, v] of fields) if (name === "terminated" || name === "truncated") signals[name] = anyTrue(v);
    for (const [name, on] of Object.entries(signals)) if (on) this.addMark(seq, name);
    this.signals = signals;
    const place = (path, make) => {
      const old = this.widgets.get(path);
      if (old) old.box.remove();
      const w = make();
      w.box = el("div", { class: "field" }, el("div", { class: "field-name", text: path }), w.el);
      this.body.append(w.box);
      this.widgets.set(path, w);
      return w;
    };
    const leaf = (path, v) => {
      const geo = imageGeometry(v);
      if (geo) {
        const w = this.widgets.get(path);
        const kind = `image:${geo.h}x${geo.w}x${geo.c}x${geo.n}`;
        const widget = w && w.kind === kind ? w : place(path, () => new ImageWidget(path, geo));
        widget.update(v, seq);
        return;
      }
      const comps = numericComponents(v);
      if (comps) {
        const w = this.widgets.get(path);
        const widget = w && w.kind === `plot:${comps.length}` ? w : place(path, () => new PlotWidget(path, comps.length, this));
        widget.push(seq, comps);
        return;
      }
      const w = this.widgets.get(path);
      const widget = w && w.kind === "text" ? w : place(path, () => new TextWidget(path));
      widget.update(v);
    };
    const walk = (path, v) => {
      if (isPlainObject(v) && !v.object && !v.graph) for (const [k, x] of Object.entries(v)) walk(`${path}.${k}`, x);
      else leaf(path, v);
    };
    for (const [name, v] of fields) {
      if (name === "terminated" || name === "truncated") continue;
      if (name === "info") {
        const w = this.widgets.get(name);
        const widget = w && w.kind === "table" ? w : place(name, () => new TableWidget(name));
        widget.update(v);
        continue;
      }
      walk(name, v);
    }
    for (const w of this.widgets.values()) if (w.flush) w.flush();
  }
  onRender(h, data) {
    this.renderBox.hidden = false;
    const v = data.render;
    const geo = imageGeometry(v);
    const when = h.now ? `now${h.sequence ? `, idle since boundary #${h.sequence}` : ""}` : `boundary #${h.sequence}`;
    const head = el("div", { class: "field-name", text: `render (${when})` });
    if (geo) {
      const w = new ImageWidget("render", geo);
      w.update(v, h.sequence);
      this.renderBox.replaceChildren(head, w.el);
    } else {
      this.renderBox.replaceChildren(head, el("div", { class: "text", text: v === undefined ? "no render output" : summary(v) }));
    }
  }
  onRenderError(h) {
    this.renderBox.hidden = false;
    this.renderBox.replaceChildren(el("div", { class: "msg bad", text: `render failed: ${h.code ? h.code + ": " : ""}${h.message}` }));
  }
  showStats() {
    const wait = (this.lastStats ?? -Infinity) + STATS_INTERVAL - performance.now();
    if (wait > 0) {
      if (!this.statsTimer) this.statsTimer = setTimeout(() => { this.statsTimer = null; this.showStats(); }, wait);
      return;
    }
    this.lastStats = performance.now();
    const rate = this.arrivals.length > 1 ? (this.arrivals.length - 1) / ((this.arrivals[this.arrivals.length - 1] - this.arrivals[0]) / 1000) : 0;
    const b = this.boundaries;
    const brate = b.length > 1 && b[b.length - 1][0] > b[0][0] ? (b[b.length - 1][1] - b[0][1]) / (b[b.length - 1][0] - b[0][0]) : 0;
    const sig = this.signals || {};
    const ep = this.episodes;
    const terminated = ep ? ep.terminated : this.marks.filter((m) => m[1] === "terminated").length;
    const truncated = ep ? ep.truncated : this.marks.filter((m) => m[1] === "truncated").length;
    const counted = !ep ? "seen in the frames this page drew (a viewer of a remote server sees only those)"
      : ep.gaps ? `counted by the viewer since it started; ${ep.gaps} boundaries between the ones it read were not read (another resource's of the same domain, or skipped while it fell behind): the counts may be short`
      : "counted by the viewer at every boundary since it started";
    if (ep) this.el.dataset.gaps = String(ep.gaps || 0);
    const parts = [
      this.paused ? "<b>paused</b>" : this.ended ? "<b>ended</b>" : this.sequence === null ? "waiting for a boundary" : "live",
      `seq <b>${this.sequence ?? "—"}</b>`,
      `rev <b>${this.revision ?? "—"}</b>`,
      `${this.lastKind ?? ""}`,
      `steps <b>${brate.toFixed(1)}</b>/s`,
      brate > 0 ? `every <b>${(1000 / brate).toFixed(1)}</b> ms` : "",
      this.delays.length ? `latency <b>${median(this.delays).toFixed(1)}</b> ms` : "",
      `drawn <b>${rate.toFixed(1)}</b>/s`,
      `skipped ${this.skipped}`,
      this.gated ? '<span title="Boundaries come faster than the page draws: the viewer subscribes once per drawn frame">paced</span>' : "",
    ];
    if (ep || terminated || truncated) {
      const least = ep && ep.gaps ? " (at least)" : "";
      parts.push(`<span class="episodes" title="episode ends ${counted}">episodes: <span class="t">${terminated}</span> terminated, <span class="u">${truncated}</span> truncated${least}</span>`);
    }
    if ("terminated" in sig) parts.push(sig.terminated ? '<b style="color:#c62828">terminated</b>' : "not terminated");
    if ("truncated" in sig) parts.push(sig.truncated ? '<b style="color:#ef8f00">truncated</b>' : "not truncated");
    this.stats.innerHTML = parts.filter((x) => x).join(" · ");
  }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

// ---- rendering loop: one credit per panel per drawn frame ----

let scheduled = false;
function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    for (const p of panels.values()) {
      if (!p.pending || p.paused) continue;
      const { h, data, descriptor } = p.pending;
      p.pending = null;
      try {
        p.onSnapshot(h, data, descriptor);
      } catch (e) {
        p.message(`cannot show the snapshot: ${e}`);
      }
      send({ op: "ready", panel: p.id });
    }
  });
}

// ---- resources ----

const resources = new Map();
const treeItems = new Map();

function updateResource(d, sequence) {
  const old = resources.get(d.id);
  resources.set(d.id, d);
  const item = treeItems.get(d.id);
  if (!item) return;
  const rev = item.querySelector(".rev");
  const seq = sequence ?? d.sequence;
  rev.textContent = `rev ${d.revision} · seq ${seq}`;
  if (old && old.revision !== d.revision) {
    rev.classList.add("changed");
    rev.title = `revision changed from ${old.revision}`;
  }
  item.dataset.revision = String(d.revision);
}

function descriptorTable(d) {
  const rows = [["kind", d.kind], ["domain", d.domain_id], ["revision", d.revision], ["sequence", d.sequence]];
  for (const k of ["batch_size", "world_timestep", "world_subtimestep", "control_timestep", "update_timestep", "render_mode", "render_fps", "name", "has_reward", "has_termination_signal", "has_truncation_signal"]) {
    if (k in d && d[k] !== null) rows.push([k, summary(d[k])]);
  }
  for (const k of ["action_space", "observation_space", "context_space"]) if (k in d) rows.push([k, spaceSummary(d[k])]);
  if (d.metadata && Object.keys(d.metadata).length) rows.push(["metadata", summary(d.metadata)]);
  if (d.operations) rows.push(["operations", [].concat(d.operations).join(", ")]);
  const t = el("table");
  for (const [k, v] of rows) t.append(el("tr", {}, el("td", { text: k }), el("td", { text: String(v) })));
  return t;
}

function renderTree(list) {
  const before = new Map([...resources].map(([id, d]) => [id, d.revision]));
  resources.clear();
  treeItems.clear();
  for (const d of list) resources.set(d.id, d);
  const kids = new Map();
  const isChild = new Set();
  for (const d of list) {
    const ids = [];
    if (d.world_id && d.world_id !== d.id && d.kind === "env") ids.push(d.world_id);
    if (d.node_id && d.node_id !== d.id && d.kind === "env") ids.push(d.node_id);
    if (isPlainObject(d.children)) ids.push(...Object.values(d.children));
    const mine = ids.filter((id) => resources.has(id) && id !== d.id);
    kids.set(d.id, mine);
    mine.forEach((id) => isChild.add(id));
  }
  const shown = new Set();
  const item = (id) => {
    const d = resources.get(id);
    shown.add(id);
    const desc = el("div", { class: "desc", hidden: "" }, descriptorTable(d));
    const toggle = el("button", { class: "toggle", text: "▸", title: "descriptor", onclick: () => {
      desc.hidden = !desc.hidden;
      toggle.textContent = desc.hidden ? "▸" : "▾";
    } });
    const li = el("li", { "data-id": id, "data-revision": String(d.revision) },
      el("div", { class: "res" }, toggle,
        el("button", { class: "name", title: `watch ${id}`, onclick: () => new Panel(id) }, idNode(id)),
        el("span", { class: `badge ${d.kind}`, text: d.kind }),
        el("span", { class: "rev", text: `rev ${d.revision} · seq ${d.sequence}` })),
      desc);
    treeItems.set(id, li);
    if (before.has(id) && before.get(id) !== d.revision) {
      const rev = li.querySelector(".rev");
      rev.classList.add("changed");
      rev.title = `revision changed from ${before.get(id)}`;
      rev.textContent = `rev ${before.get(id)} → ${d.revision} · seq ${d.sequence}`;
    }
    const children = (kids.get(id) || []).filter((c) => !shown.has(c));
    if (children.length) li.append(el("ul", {}, ...children.map(item)));
    return li;
  };
  const roots = list.filter((d) => !isChild.has(d.id)).map((d) => d.id);
  const tree = $("#tree");
  tree.replaceChildren(...roots.map(item));
  for (const d of list) if (!shown.has(d.id)) tree.append(item(d.id));
  tree.dataset.count = String(list.length);
}

// ---- connection to the viewer ----

let socket = null;
let viewerLost = false;

function send(obj) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(new TextEncoder().encode(JSON.stringify(obj)));
}

function setStatus(text, cls) {
  const s = $("#status");
  s.textContent = text;
  s.className = `status ${cls}`;
}

function banner(text, cls = "") {
  const b = $("#banner");
  b.hidden = !text;
  b.textContent = text || "";
  b.className = `banner ${cls}`;
}

function onMessage(buffer) {
  const { header: h, blob } = decode(buffer);
  const panel = h.panel !== undefined ? panels.get(h.panel) : null;
  switch (h.type) {
    case "upstream":
      if (h.state === "connected") {
        window.viewerState.inProcess = !!h.in_process;
        setStatus("connected", "ok");
        $("#server").textContent = `${h.url} · ${h.server} ${h.server_version} · session ${h.session_id}`;
        if (window.viewerState.upstreamLost) banner(`Reconnected to ${h.url} (new session ${h.session_id}); panels resubscribed.`, "info");
        else banner("");
        window.viewerState.upstreamLost = false;
      } else {
        setStatus(h.state === "lost" ? "connection lost" : "server unreachable", "bad");
        banner(h.state === "lost" ? `Lost the connection to the UniEnv server: ${h.message}` : `Cannot reach the UniEnv server: ${h.code}: ${h.message} (retrying)`);
        window.viewerState.upstreamLost = true;
      }
      break;
    case "resources":
      renderTree(revive(h.descriptors, blob));
      break;
    case "subscribed":
      if (panel) panel.onSubscribed(h, revive(h.descriptor, blob));
      break;
    case "snapshot":
      if (panel) {
        panel.pending = { h, data: revive(h.data, blob), descriptor: revive(h.descriptor, blob) };
        schedule();
      }
      break;
    case "stale":
      if (panel) {
        panel.message(`Boundary #${h.sequence} is the latest; this panel shows #${h.shown}. Boundaries came faster than the page draws, so the viewer subscribes once per drawn frame, and the domain stopped between two frames.`, "warn");
      }
      break;
    case "subscription_error":
    case "ended":
      if (panel) panel.onError(h);
      break;
    case "render":
      if (panel) panel.onRender(h, revive(h.data, blob));
      break;
    case "render_error":
      if (panel) panel.onRenderError(h);
      break;
    case "render_wait":
      if (panel) panel.renderBox.replaceChildren(el("div", { class: "field-name", text: `render: ${h.message}…` }));
      break;
    case "error":
      banner(`viewer: ${h.code ? h.code + ": " : ""}${h.message}`);
      break;
  }
}

function connect() {
  // Beside the page: `/ws`, or `/hosts/NAME/ws` for a host behind a relay.
  socket = new WebSocket(`ws://${location.host}${location.pathname.replace(/[^/]*$/, "")}ws`);
  socket.binaryType = "arraybuffer";
  socket.onopen = () => {
    if (viewerLost) banner("");
    viewerLost = false;
    setStatus("connecting to the server…", "warn");
    for (const p of panels.values()) p.subscribe();
  };
  socket.onmessage = (e) => {
    try {
      onMessage(e.data);
    } catch (err) {
      banner(`cannot read a message from the viewer: ${err}`);
    }
  };
  socket.onclose = () => {
    viewerLost = true;
    setStatus("viewer unreachable", "bad");
    banner("Lost the connection to the viewer process; retrying every second…");
    setTimeout(connect, 1000);
  };
}

window.viewerState = { panels, resources, upstreamLost: false, inProcess: false, watch: (id) => new Panel(id), history: HISTORY };
$("#refresh").addEventListener("click", () => send({ op: "refresh" }));
// Deep links: `/?watch=ID[,ID…]` opens those panels (they subscribe when the
// connection to the viewer opens).
for (const id of new Set((PAGE_PARAMS.get("watch") || "").split(",").map((s) => s.trim()).filter((s) => s))) {
  new Panel(id);
}
connect();
