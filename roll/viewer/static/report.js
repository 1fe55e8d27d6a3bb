// The run report's script: draws the page from the JSON embedded in the "run-data" element (no libraries, nothing fetched).
(function () {
  const data = JSON.parse(document.getElementById("run-data").textContent);
  const app = document.getElementById("app");
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  const fmt = (v, d) => (v === null || v === undefined) ? "–" : Number(v).toFixed(d === undefined ? 3 : d);
  const isSuccess = ep => ((ep.env_metrics || {}).success || 0) >= 0.5;
  const rewardsOf = ep => ep.step_rewards || (ep.turns || []).map(t => t.reward);
  const isStepSample = ep => ep.step_index !== null && ep.step_index !== undefined;
  const where = ep => ep.kind === "val" ? "validation @ step " + ep.step : "step " + ep.step;

  app.append(el("p", {class: "meta"}, data.steps.length + " logged steps · " + data.episodes.length +
    " saved episodes · written " + data.written));

  if (data.plots.length) {
    app.append(el("h2", {}, "Learning curves"));
    const box = el("div", {class: "plots"});
    for (const p of data.plots) box.append(el("a", {href: p}, el("img", {src: p, alt: p})));
    app.append(box);
  }

  app.append(el("h2", {}, "Steps"));
  const cols = [["step", "step", 0], ["success", "success", 3], ["valid", "valid", 3], ["score", "score", 3],
    ["entropy", "entropy", 3], ["kl", "kl", 4], ["val_success", "val success", 3], ["val_valid", "val valid", 3],
    ["step_s", "step s", 1]];
  const table = el("table", {class: "steps"});
  table.append(el("tr", {}, ...cols.map(c => el("th", {}, c[1])), el("th", {}, "alarms")));
  for (const row of data.steps) {
    table.append(el("tr", {"data-step": row.step}, ...cols.map(c => el("td", {}, fmt(row[c[0]], c[2]))),
      el("td", {class: "alarm"}, row.alarms.join(", "))));
  }
  app.append(table);

  // --- episodes, filters ------------------------------------------------------------------------
  app.append(el("h2", {}, "Episodes"));
  const uniq = xs => [...new Set(xs)];
  const select = (name, options) => el("select", {name: name}, ...options.map(o => el("option", {value: o[0]}, o[1])));
  const filters = {
    kind: select("kind", [["", "train and validation"], ["train", "train"], ["val", "validation"]]),
    tag: select("tag", [["", "every tag"], ...uniq(data.episodes.map(e => e.tag)).map(t => [t, t])]),
    outcome: select("outcome", [["", "success and failure"], ["1", "success"], ["0", "failure"]]),
    step: select("step", [["", "every step"], ...uniq(data.episodes.map(e => e.kind + ":" + e.step)).map(s => {
      const [k, n] = s.split(":"); return [s, k === "val" ? "validation @ step " + n : "step " + n]; })]),
  };
  const shown = el("span", {class: "meta"});
  app.append(el("div", {class: "filters"}, ...Object.values(filters), shown));
  const list = el("div", {id: "episodes"});
  app.append(list);

  function segments(tokens) {
    // one {prompt: [a, b), reply: [b, c)} per turn: the tokens before a reply, then the reply
    const out = [];
    if (!tokens) return out;
    const m = tokens.response_mask;
    let from = 0;
    for (let i = 0; i < m.length;) {
      if (!m[i]) { i++; continue; }
      let j = i;
      while (j < m.length && m[j]) j++;
      out.push({prompt: [from, i], reply: [i, j]});
      from = j; i = j;
    }
    return out;
  }
  function tokenSpans(tokens, a, b) {
    const box = el("div", {class: "tokens"});
    for (let i = a; i < b; i++) {
      const span = el("span", {class: tokens.response_mask[i] ? "tok resp" : "tok prompt"}, tokens.text[i]);
      if (tokens.response_mask[i]) {
        const lp = tokens.logprobs[i], p = Math.exp(lp);
        span.title = "log-prob " + lp.toFixed(4) + "  (p = " + p.toFixed(3) + ")";
        span.style.background = "hsl(" + Math.round(120 * p) + ", 70%, 82%)";
      } else span.title = "prompt token (response mask 0)";
      box.append(span);
    }
    return box;
  }
  function drawEpisode(ep, withTokens) {
    const box = el("div", {});
    if (ep.turns_note) box.append(el("p", {class: "note"}, "No boards: " + ep.turns_note));
    const segs = withTokens ? segments(ep.tokens) : [];
    // trajectories saved before per-turn records existed: replies and rewards only
    const turns = ep.turns || (ep.actions || []).map((reply, k) => ({reply: reply, reward: rewardsOf(ep)[k]}));
    // a step-wise sample (step_index set) holds one turn's prompt and reply: its tokens go to that turn
    const own = isStepSample(ep) ? ep.step_index : null;
    turns.forEach((t, k) => {
      const head = el("h4", {}, "Turn " + (k + 1) + " · reward " + fmt(t.reward, 2));
      if (k === own) head.append(" · this sample's turn");
      if ((ep.random_turns || []).includes(k)) head.append(" · ", el("span", {class: "random-turn", title: "played by random_action_rate, not sampled from the policy"}, "random move"));
      if (t.valid !== undefined) head.append(" · ", el("span", {class: t.valid ? "valid" : "invalid"}, t.valid ? "valid" : "invalid"));
      if (t.action !== null && t.action !== undefined) head.append(" · action " + t.action);
      const turn = el("div", {class: k === own ? "turn sample-turn" : "turn"}, head);
      if (t.board !== undefined) turn.append(el("pre", {class: "board"}, t.board));
      turn.append(el("div", {class: "meta"}, "reply"), el("pre", {class: "reply"}, t.reply));
      if (t.invalid_reason) turn.append(el("div", {class: "note"}, t.invalid_reason));
      const seg = own === null ? segs[k] : (k === own ? segs[0] : undefined);
      if (seg) {
        const prompt = el("details", {}, el("summary", {class: "meta"}, "prompt tokens (" + (seg.prompt[1] - seg.prompt[0]) + ")"));
        prompt.append(tokenSpans(ep.tokens, seg.prompt[0], seg.prompt[1]));
        turn.append(prompt, el("div", {class: "meta"}, "reply tokens (hover: log-prob)"), tokenSpans(ep.tokens, seg.reply[0], seg.reply[1]));
      }
      if (t.board_after !== undefined) turn.append(el("div", {class: "meta"}, "board after"), el("pre", {class: "board"}, t.board_after));
      box.append(turn);
    });
    return box;
  }
  function summaryOf(ep) {
    const ok = isSuccess(ep), rewards = rewardsOf(ep);
    return el("summary", {}, el("span", {class: "badge " + (ok ? "ok" : "fail")}, ok ? "success" : "failure"),
      " " + where(ep) + " · " + ep.tag + " · seed " + ep.env_seed + " · ", el("span", {class: "turn-count"}, rewards.length + " turns"),
      " · rewards ", el("span", {class: "rewards"}, rewards.map(r => fmt(r, 2)).join(", ")), " · score " + fmt(ep.score, 2),
      isStepSample(ep) ? " · step sample of turn " + (ep.step_index + 1) : null);
  }
  data.episodes.forEach((ep, i) => {
    const rewards = rewardsOf(ep);
    const d = el("details", {class: "episode", "data-index": i, "data-traj": ep.traj_id, "data-kind": ep.kind, "data-step": ep.step, "data-tag": ep.tag,
      "data-success": isSuccess(ep) ? "1" : "0", "data-seed": ep.env_seed, "data-turns": rewards.length,
      "data-rewards": JSON.stringify(rewards)}, summaryOf(ep));
    const draw = () => { if (!d.dataset.drawn) { d.append(drawEpisode(ep, true)); d.dataset.drawn = "1"; } };
    d.addEventListener("toggle", () => { if (d.open) draw(); });
    if (location.hash === "#open") { d.open = true; draw(); }  // report.html#open: every episode drawn (printing, tests)
    list.append(d);
  });
  function applyFilters() {
    let n = 0;
    for (const d of list.children) {
      const ok = (!filters.kind.value || d.dataset.kind === filters.kind.value) && (!filters.tag.value || d.dataset.tag === filters.tag.value)
        && (!filters.outcome.value || d.dataset.success === filters.outcome.value)
        && (!filters.step.value || d.dataset.kind + ":" + d.dataset.step === filters.step.value);
      d.hidden = !ok; n += ok ? 1 : 0;
    }
    shown.textContent = "showing " + n + " of " + list.children.length;
  }
  Object.values(filters).forEach(s => s.addEventListener("change", applyFilters));
  applyFilters();

  // --- the same validation map at two steps ---------------------------------------------------------
  const valSteps = uniq(data.episodes.filter(e => e.kind === "val").map(e => e.step)).sort((a, b) => a - b);
  if (valSteps.length >= 2) {
    app.append(el("h2", {}, "Same validation maps at two steps"));
    const pick = v => el("select", {}, ...valSteps.map(s => { const o = el("option", {value: s}, "validation @ step " + s); if (s === v) o.selected = true; return o; }));
    const left = pick(valSteps[0]), right = pick(valSteps[valSteps.length - 1]);
    const grid = el("div", {id: "compare"});
    app.append(el("div", {class: "filters"}, left, right), grid);
    const drawCompare = () => {
      grid.replaceChildren();
      const at = s => new Map(data.episodes.filter(e => e.kind === "val" && e.step === Number(s)).map(e => [e.tag + ":" + e.env_seed, e]));
      const a = at(left.value), b = at(right.value);
      for (const [key, ea] of a) {
        const eb = b.get(key);
        if (!eb) continue;
        grid.append(el("div", {class: "compare", "data-seed": ea.env_seed},
          el("div", {}, summaryOf(ea), drawEpisode(ea, false)), el("div", {}, summaryOf(eb), drawEpisode(eb, false))));
      }
      if (!grid.children.length) grid.append(el("p", {class: "note"}, "no map saved at both steps"));
    };
    left.addEventListener("change", drawCompare); right.addEventListener("change", drawCompare);
    drawCompare();
  }
})();
