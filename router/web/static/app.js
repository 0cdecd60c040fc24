// hongbao's red-packet page. Plain JavaScript, no build step, no other
// origin. Money is integer fen everywhere: typed yuan are parsed to fen as
// strings, fen are shown as yuan by string handling; no float arithmetic.
"use strict";

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const view = () => $("#view");

  // ---- money -------------------------------------------------------------

  // parseYuan turns "8.88" into 888 (fen) by string handling, or null.
  function parseYuan(text) {
    const m = /^\s*(\d{1,10})(?:\.(\d{0,2}))?\s*$/.exec(text || "");
    if (!m) return null;
    const digits = (m[1] + (m[2] || "").padEnd(2, "0")).replace(/^0+(?=\d)/, "");
    return Number.parseInt(digits, 10); // at most 12 digits: an exact integer
  }

  // yuan shows fen as "1,234.56" by string handling.
  function yuan(fen) {
    const neg = fen < 0;
    const s = String(Math.abs(fen)).padStart(3, "0");
    const whole = s.slice(0, -2).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return (neg ? "-" : "") + whole + "." + s.slice(-2);
  }

  // ---- session -----------------------------------------------------------

  const session = {
    get token() { return sessionStorage.getItem("hb.token") || ""; },
    get user() { return sessionStorage.getItem("hb.user") || ""; },
    set(token, user) { sessionStorage.setItem("hb.token", token); sessionStorage.setItem("hb.user", user); },
    clear() { sessionStorage.removeItem("hb.token"); sessionStorage.removeItem("hb.user"); },
  };

  // userOf reads the user ID out of a token ("<user>.<expiry>.<mac>").
  function userOf(token) {
    const first = token.split(".")[0];
    return /^\d+$/.test(first) ? first : "";
  }

  // A token handed over by the host app in the fragment (#token=... or
  // #/p/123&token=...) is kept for this tab and removed from the address.
  function takeFragmentToken() {
    const m = /[#&?]token=([^&]+)/.exec(location.hash);
    if (!m) return;
    const token = decodeURIComponent(m[1]);
    session.set(token, userOf(token));
    const rest = location.hash.replace(/[&?]?token=[^&]+/, "").replace(/^#&/, "#");
    history.replaceState(null, "", location.pathname + (rest === "#" ? "" : rest));
  }

  // ---- the API -----------------------------------------------------------

  class Problem extends Error {
    constructor(status, body, retryAfter) {
      super(body.detail || body.title || ("HTTP " + status));
      this.status = status; this.code = body.code || "http_" + status; this.body = body; this.retryAfter = retryAfter;
    }
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  // call makes one request; a problem answer is thrown as a Problem.
  async function call(method, path, body, headers) {
    const h = Object.assign({}, headers || {});
    if (session.token) h.Authorization = "Bearer " + session.token;
    if (body !== undefined) h["Content-Type"] = "application/json";
    let resp;
    try {
      resp = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new Problem(0, { code: "network", detail: String(e) }, 2);
    }
    const text = await resp.text();
    let data = {};
    try { data = text ? JSON.parse(text) : {}; } catch (e) { data = { detail: text }; }
    if (!resp.ok) {
      const ra = Number.parseInt(resp.headers.get("Retry-After") || "", 10);
      throw new Problem(resp.status, data, Number.isFinite(ra) && ra >= 0 ? ra : null);
    }
    return data;
  }

  // Codes answered while the system is busy: the request is retried
  // automatically, after Retry-After seconds (1 when not said).
  const retryable = new Set(["busy", "rate_limited", "concurrency_limited", "unavailable", "timeout", "body_timeout", "network"]);

  // api is call with the automatic retries; onWait(problem, seconds) shows
  // the wait. Every request retried here is idempotent (sends carry an
  // Idempotency-Key).
  async function api(method, path, body, opts) {
    const o = opts || {};
    for (let attempt = 0; ; attempt++) {
      try {
        return await call(method, path, body, o.headers);
      } catch (p) {
        if (!(p instanceof Problem) || !retryable.has(p.code) || attempt >= (o.tries || 8)) throw p;
        const secs = p.retryAfter == null ? 1 : Math.min(p.retryAfter, 30);
        if (o.onWait) o.onWait(p, secs);
        await sleep(secs * 1000 + Math.floor(Math.random() * 250));
      }
    }
  }

  function newKey() {
    const b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return "page-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  // ---- messages ----------------------------------------------------------

  // human turns every problem code of the API into a sentence for people.
  function human(p) {
    const detail = p.body && p.body.detail ? " (" + p.body.detail + ")" : "";
    switch (p.code) {
      case "sold_out": return "手慢了，红包派完了 — Too late: every share of this red packet has been taken.";
      case "expired": return "This red packet has expired; what nobody took went back to the sender.";
      case "already_opened": return "You already opened this red packet.";
      case "busy": return "So many people are opening it right now! Trying again in " + (p.retryAfter == null ? 1 : p.retryAfter) + " s…";
      case "rate_limited": return "Too many requests from you: slowing down, trying again in " + (p.retryAfter == null ? 1 : p.retryAfter) + " s…";
      case "concurrency_limited": return "Too many of your requests at once: trying again in " + (p.retryAfter == null ? 1 : p.retryAfter) + " s…";
      case "unavailable": case "timeout": case "body_timeout": case "network": return "The service did not answer; trying again…";
      case "insufficient_funds": return "Your balance is too low for this red packet. Top up, or send less.";
      case "not_in_audience": return "This red packet is for other people: its sender named who may open it.";
      case "daily_limit": return dailyLimit(p);
      case "invalid_audience": case "invalid_audience_user": return "\"Only for\" takes user IDs, whole numbers like 43, separated by commas." + detail;
      case "duplicate_audience_user": return "A user is named twice in \"Only for\"." + detail;
      case "empty_audience": return "Name at least one user in \"Only for\", or leave it empty for anyone.";
      case "audience_over_limit": return "Too many users in \"Only for\"." + detail;
      case "count_over_audience": return "More shares than people who may open it: lower the shares to at most the users named.";
      case "send_cancelled": return "That send could not be completed in time and was cancelled: nothing was charged. Please send it again.";
      case "invalid_total": return "Enter the total in yuan, like 10 or 8.88 (at least ¥0.01)." + detail;
      case "total_below_count": return "Each share needs at least ¥0.01: put in at least as many fen as shares.";
      case "total_over_limit": return "That total is over the limit for one red packet." + detail;
      case "share_over_limit": return "One share could be over the per-share limit: add shares or lower the total." + detail;
      case "invalid_count": return "The number of shares must be a whole number, at least 1." + detail;
      case "count_over_limit": return "Too many shares for one red packet." + detail;
      case "fixed_not_divisible": return "A fixed red packet splits evenly: the total in fen must divide by the number of shares.";
      case "invalid_type": return "Pick lucky (random amounts) or fixed (equal amounts).";
      case "invalid_greeting": return "The greeting has characters that cannot be sent." + detail;
      case "greeting_too_long": return "The greeting is too long." + detail;
      case "idempotency_key_reused": return "This send was already made with other details; please send again.";
      case "invalid_idempotency_key": return "The request's key was refused; please try again.";
      case "unauthorized": return "Please sign in first.";
      case "token_expired": return "Your sign-in has expired: please sign in again.";
      case "forbidden": return "You may not do that.";
      case "replayed": return "That request was already made once and was refused as a replay; please try again.";
      case "not_found": return "There is no such red packet (check the link).";
      case "invalid_id": return "That link's red packet number is not valid.";
      case "invalid_user": return "A user ID is a positive whole number, like 42.";
      case "invalid_cursor": case "invalid_limit": case "invalid_query": return "That page of history cannot be shown." + detail;
      case "invalid_month": return "That month cannot be shown (use YYYY-MM)." + detail;
      case "malformed_json": case "unknown_field": case "unsupported_media_type": case "body_too_large": case "malformed_body": case "method_not_allowed":
      case "null_value": case "trailing_data": case "truncated_body": case "unexpected_body": case "duplicate_key":
      case "malformed_request":
        return "The page sent something the server did not understand (" + p.code + "): reload the page.";
      case "headers_too_large": return "The browser sent too much with the request (cookies, most likely): clear this site's cookies and reload.";
      case "internal": return "Something went wrong on our side; nothing was charged twice. Please try again." + reqID(p);
      default: return (p.body && (p.body.detail || p.body.title)) || "Something went wrong (" + p.code + ").";
    }
  }
  // dailyLimit says which daily limit refused and when it resets.
  function dailyLimit(p) {
    const l = (p.body && p.body.limit) || {};
    const until = l.resets_at ? " It resets at " + new Date(l.resets_at).toLocaleString() + "." : "";
    switch (l.name) {
      case "daily_send_count": return "You have sent today's " + l.value + " red packets." + until;
      case "daily_send_total": return "That would pass today's sending limit of ¥" + yuan(l.value) + "." + until;
      case "daily_receive_total": return "Opening it could pass today's receiving limit of ¥" + yuan(l.value) + ": nothing was opened." + until;
    }
    return "A daily limit of yours was reached." + until;
  }
  const reqID = (p) => (p.body && p.body.request_id ? " [" + p.body.request_id + "]" : "");

  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
      else if (k === "text") n.textContent = v;
      else n.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids.flat()) if (k != null) n.append(k.nodeType ? k : String(k));
    return n;
  }

  function say(box, kind, text) {
    box.className = "msg " + kind;
    box.textContent = text;
    box.hidden = !text;
  }

  let toastTimer = 0;
  function toast(text) {
    const t = $("#toast");
    t.textContent = text; t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, 2500);
  }

  // handleAuth sends the user back to sign-in when the token is refused.
  function handleAuth(p) {
    if (p instanceof Problem && (p.code === "unauthorized" || p.code === "token_expired")) {
      session.clear();
      render();
      toast(human(p));
      return true;
    }
    return false;
  }

  // ---- views -------------------------------------------------------------

  function signIn(next) {
    const box = el("p", { class: "msg", hidden: true });
    const input = el("input", { id: "signin-user", inputmode: "numeric", autocomplete: "off", placeholder: "e.g. 42" });
    const form = el("form", { class: "card", id: "signin" },
      el("h2", { text: "Sign in" }),
      el("p", { class: "hint", text: "In the app, this page receives your sign-in. In a dev cluster, type any user ID:" }),
      el("label", { for: "signin-user", text: "User ID" }), input,
      el("button", { class: "btn red", type: "submit", id: "signin-go", text: "Sign in" }), box);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const r = await call("POST", "/dev/token", { user: input.value.trim() });
        session.set(r.token, r.user);
        render(next);
      } catch (p) {
        say(box, "bad", p.status === 404 ? "Dev sign-in is off here: open this page from the app." : human(p));
      }
    });
    return form;
  }

  function sendCard() {
    const box = el("p", { class: "msg", hidden: true });
    const total = el("input", { id: "send-total", inputmode: "decimal", autocomplete: "off", placeholder: "0.00" });
    const count = el("input", { id: "send-count", inputmode: "numeric", autocomplete: "off", value: "3" });
    const greeting = el("input", { id: "send-greeting", maxlength: "60", value: "恭喜发财，大吉大利" });
    const only = el("input", { id: "send-audience", inputmode: "numeric", autocomplete: "off", placeholder: "anyone (or user IDs: 43, 44)" });
    const shown = el("p", { class: "total", id: "send-shown" }, el("small", { text: "¥" }), "0.00");
    const seg = el("div", { class: "seg" },
      el("label", {}, el("input", { type: "radio", name: "type", value: "random", checked: true }), "拼手气 Lucky"),
      el("label", {}, el("input", { type: "radio", name: "type", value: "fixed" }), "普通 Fixed"));
    const go = el("button", { class: "btn red", type: "submit", id: "send-go", text: "塞钱进红包 Send" });
    const form = el("form", { class: "card", id: "send" }, el("h2", { text: "Send a red packet" }),
      el("label", { for: "send-total", text: "Total (yuan)" }), total,
      el("div", { class: "row" }, el("div", {}, el("label", { for: "send-count", text: "Shares" }), count),
        el("div", {}, el("label", { text: "Type" }), seg)),
      el("label", { for: "send-greeting", text: "Greeting" }), greeting,
      el("label", { for: "send-audience", text: "Only for" }), only, shown, go, box);
    total.addEventListener("input", () => {
      const fen = parseYuan(total.value);
      shown.lastChild.textContent = fen == null ? "—" : yuan(fen);
    });
    let key = newKey(); // one per send: a retry after busy is the same send
    form.addEventListener("input", (ev) => { if (ev.target !== go) key = newKey(); });
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const fen = parseYuan(total.value);
      if (fen == null || fen < 1) return say(box, "bad", human({ code: "invalid_total", body: {} }));
      if (!/^\d{1,7}$/.test(count.value.trim())) return say(box, "bad", human({ code: "invalid_count", body: {} }));
      const body = { total: fen, count: Number.parseInt(count.value.trim(), 10),
        type: $("input[name=type]:checked", form).value, greeting: greeting.value };
      const users = only.value.split(/[\s,，]+/).filter((u) => u !== "");
      if (users.length) body.audience = { users }; // the server checks them: the page only splits
      go.disabled = true;
      say(box, "wait", "Sending…");
      try {
        const p = await api("POST", "/v1/packets", body, { headers: { "Idempotency-Key": key },
          onWait: (pr) => say(box, "wait", human(pr)) });
        key = newKey();
        form.replaceWith(sentCard(p));
        refreshWallet();
      } catch (p) {
        if (!handleAuth(p)) say(box, "bad", human(p));
      } finally { go.disabled = false; }
    });
    return form;
  }

  // audienceText names who a packet is for: the users to its sender, the
  // group's size (and whether it names the reader) to anyone else.
  function audienceText(a) {
    if (a.users) return (a.users.length === 1 ? "user " : "users ") + a.users.join(", ");
    if (a.size === 1) return a.includes_you ? "you" : "one person";
    return "a group of " + a.size + (a.includes_you ? ", you among them" : "");
  }

  function linkOf(id) { return location.origin + location.pathname + "#/p/" + id; }

  function sentCard(p) {
    const link = linkOf(p.id);
    const input = el("input", { id: "share-link", readonly: true, value: link });
    const copy = el("button", { class: "btn small", type: "button", text: "Copy" });
    copy.addEventListener("click", async () => {
      input.select();
      try { await navigator.clipboard.writeText(link); toast("Link copied"); } catch (e) { document.execCommand("copy"); toast("Link copied"); }
    });
    return el("div", { class: "card", id: "sent", "data-packet": p.id },
      el("h2", { text: "Sent: ¥" + yuan(p.total) + " in " + p.count + " shares" }),
      el("p", { class: "hint", id: "sent-audience", text: p.audience
        ? "Only for " + audienceText(p.audience) + ": nobody else can open it."
        : "Share this link in the chat; whoever opens it first gets a share." }),
      el("div", { class: "share" }, input, copy),
      el("div", { class: "row" },
        el("a", { class: "btn", href: "#/p/" + p.id, id: "sent-open", text: "Open it" }),
        el("button", { class: "btn red", type: "button", text: "Send another", onclick: () => render() })));
  }

  function walletCard() {
    const amount = el("span", { class: "amount", id: "balance", text: "…" });
    const topup = el("button", { class: "btn small", type: "button", id: "topup", text: "Top up" });
    const box = el("p", { class: "msg", hidden: true });
    topup.addEventListener("click", async () => {
      topup.disabled = true;
      try {
        const w = await api("POST", "/v1/dev/topup", undefined, { headers: { "Idempotency-Key": newKey() } });
        amount.textContent = "¥" + yuan(w.balance);
        amount.dataset.fen = w.balance;
        toast("Topped up");
      } catch (p) {
        if (p.status === 404) { topup.hidden = true; say(box, "bad", "Top-up is a dev cluster's; here the operator credits wallets."); }
        else if (!handleAuth(p)) say(box, "bad", human(p));
      } finally { topup.disabled = false; }
    });
    return el("div", { class: "card", id: "wallet" },
      el("div", { class: "wallet" }, el("div", {}, el("span", { class: "hint", text: "Wallet" }), el("br"), amount), topup), box);
  }

  async function refreshWallet() {
    const amount = $("#balance");
    if (!amount) return;
    try {
      const w = await api("GET", "/v1/me/wallet", undefined, { tries: 3 });
      amount.textContent = "¥" + yuan(w.balance);
      amount.dataset.fen = w.balance;
    } catch (p) { if (!handleAuth(p)) amount.textContent = "—"; }
  }

  function historyCard() {
    const list = el("ul", { class: "list", id: "history" });
    const tabs = el("div", { class: "tabs" });
    const show = async (kind) => {
      for (const b of tabs.children) b.className = b.dataset.kind === kind ? "on" : "";
      list.replaceChildren(el("li", { class: "empty", text: "…" }));
      if (kind === "statement") return statement(list);
      try {
        const h = await api("GET", "/v1/me/" + kind + "?limit=20", undefined, { tries: 3 });
        list.replaceChildren(...(h.items.length ? h.items.map((it) => el("li", {},
          el("a", { href: "#/p/" + it.packet }, "Packet " + it.packet.slice(-6), el("span", { class: "sub", text: when(it.at) })),
          el("span", { class: "money", "data-fen": it.amount, text: (kind === "sent" ? "-¥" : "+¥") + yuan(it.amount) })))
          : [el("li", { class: "empty", text: kind === "sent" ? "Nothing sent yet." : "Nothing received yet." })]));
      } catch (p) { if (!handleAuth(p)) list.replaceChildren(el("li", { class: "empty", text: human(p) })); }
    };
    for (const [kind, label] of [["received", "Received"], ["sent", "Sent"], ["statement", "This month"]]) {
      tabs.append(el("button", { type: "button", "data-kind": kind, text: label, onclick: () => show(kind) }));
    }
    show("received");
    return el("div", { class: "card" }, el("h2", { text: "History" }), tabs, list);
  }

  // statement fills list with the user's statement of this month (the
  // cluster's): the opening balance, each kind's count and sum, the
  // closing balance; what finance reconciles, as the user sees it.
  const kinds = { topup: "Top-ups", send: "Sent", open: "Received", refund: "Refunded", void: "Voided" };
  async function statement(list) {
    try {
      const s = await api("GET", "/v1/me/statement", undefined, { tries: 3 });
      const mine = s.balances.find((b) => b.user === session.user) || { opening: 0, closing: 0 };
      const money = (fen, id) => el("span", { class: "money", id, "data-fen": fen, text: (fen < 0 ? "-¥" : "¥") + yuan(Math.abs(fen)) });
      const rows = [el("li", { id: "st-opening" }, "Opening balance, " + s.day, money(mine.opening))];
      for (const [k, label] of Object.entries(kinds)) {
        const t = s.totals[k];
        if (t && t.n) rows.push(el("li", { id: "st-" + k }, label + " ×" + t.n, money(t.sum)));
      }
      rows.push(el("li", { id: "st-closing" }, "Closing balance", money(mine.closing)));
      list.replaceChildren(...rows);
    } catch (p) { if (!handleAuth(p)) list.replaceChildren(el("li", { class: "empty", text: human(p) })); }
  }

  function when(rfc) {
    const d = new Date(rfc);
    return isNaN(d) ? rfc : d.toLocaleString();
  }

  function home() {
    view().replaceChildren(sendCard(), walletCard(), historyCard());
    refreshWallet();
  }

  // ---- one packet ----------------------------------------------------------

  async function packet(id) {
    const env = el("div", { class: "envelope", id: "envelope" },
      el("div", { class: "flap" }),
      el("div", { class: "from", id: "env-from", text: "A red packet for you" }),
      el("div", { class: "greet", id: "env-greeting", text: "恭喜发财，大吉大利" }));
    const box = el("p", { class: "msg", id: "packet-msg", hidden: true });
    const detailCard = el("div", { class: "card", id: "detail", hidden: true });
    view().replaceChildren(env, el("div", { class: "card" }, box,
      el("a", { class: "btn", href: "#/", text: "Send your own" })), detailCard);
    box.parentNode.hidden = true;
    const show = (kind, text) => { box.parentNode.hidden = false; say(box, kind, text); };

    let d = null;
    try {
      d = await api("GET", "/v1/packets/" + id, undefined, { tries: 4, onWait: (p) => show("wait", human(p)) });
      $("#env-from").textContent = "From user " + d.sender + (d.audience ? " · for " + audienceText(d.audience) : "");
      $("#env-greeting").textContent = d.greeting || "恭喜发财，大吉大利";
    } catch (p) {
      if (handleAuth(p)) return;
      show("bad", human(p));
      env.append(el("div", { class: "closed", text: human(p) }));
      return;
    }
    const mine = d.records.find((r) => r.user === session.user);
    if (mine) return reveal(env, mine.amount, "You already opened this red packet.", id);
    const g = await api("POST", "/v1/packets/" + id + "/grab", undefined, { tries: 4 }).catch((p) => ({ error: p }));
    if (g.error) { if (!handleAuth(g.error)) show("bad", human(g.error)); return; }
    if (!g.can_open && g.reason !== "already_opened") {
      const p = { code: g.reason, body: {} };
      env.append(el("div", { class: "closed", id: "closed", text: human(p) }));
      show("bad", human(p));
      return showDetail(id);
    }
    const coin = el("button", { class: "coin", id: "open", type: "button", "aria-label": "Open", text: "開" });
    env.append(coin);
    coin.addEventListener("click", async () => {
      coin.disabled = true;
      env.classList.add("spinning");
      const started = Date.now();
      try {
        const r = await api("POST", "/v1/packets/" + id + "/open", undefined, { tries: 10, onWait: (p) => show("wait", human(p)) });
        await sleep(Math.max(0, 700 - (Date.now() - started))); // let the coin turn
        env.classList.remove("spinning");
        box.parentNode.hidden = true;
        reveal(env, r.amount, r.status === "already_opened" ? "You already opened this red packet." : "Credited to your wallet.", id);
      } catch (p) {
        env.classList.remove("spinning");
        if (handleAuth(p)) return;
        coin.remove();
        env.append(el("div", { class: "closed", id: "closed", text: human(p) }));
        show("bad", human(p));
        showDetail(id);
      }
    });
  }

  function reveal(env, amount, note, id) {
    env.append(el("div", { class: "result" },
      el("div", { class: "band" }, $("#env-from").textContent, el("b", { text: $("#env-greeting").textContent })),
      el("div", { class: "hint", text: "You got" }),
      el("div", { class: "got", id: "got", "data-fen": amount }, el("small", { text: "¥" }), yuan(amount)),
      el("div", { class: "note", id: "got-note", text: note })));
    // A timer, not an animation frame: frames do not come to a hidden tab.
    setTimeout(() => env.classList.add("opened"), 30);
    showDetail(id);
  }

  async function showDetail(id) {
    const card = $("#detail");
    if (!card) return;
    let d;
    try { d = await api("GET", "/v1/packets/" + id, undefined, { tries: 4 }); } catch (p) {
      if (!handleAuth(p)) { card.hidden = false; card.replaceChildren(el("p", { class: "msg bad", text: human(p) })); }
      return;
    }
    const taken = d.count - d.remaining_count;
    const head = el("p", { class: "hint", id: "detail-head" },
      taken + "/" + d.count + " opened, ¥" + yuan(d.total - d.remaining_amount) + " of ¥" + yuan(d.total) +
      (d.status === "expired" || d.status === "closed" ? " · expired" : "") +
      (d.type === "fixed" ? " · fixed" : " · lucky") +
      (d.audience ? " · only for " + audienceText(d.audience) : ""));
    const items = d.records.map((r, i) => el("li", { class: "record", "data-user": r.user },
      el("span", {}, (r.user === session.user ? "You" : "User " + r.user),
        d.best && d.best === r.user ? el("span", { class: "best", text: "手气最佳 Best luck" }) : null,
        el("span", { class: "sub", text: "#" + (i + 1) + " · " + when(r.at) })),
      el("span", { class: "money", "data-fen": r.amount, text: "¥" + yuan(r.amount) })));
    card.hidden = false;
    card.dataset.total = d.total;
    card.dataset.remaining = d.remaining_amount;
    card.replaceChildren(el("h2", { text: (d.greeting || "Red packet") }), head,
      el("ul", { class: "list", id: "records" }, items.length ? items : [el("li", { class: "empty", text: "Nobody has opened it yet." })]));
  }

  // ---- rain ------------------------------------------------------------------

  // rain drops the activity packets in ids as falling envelopes; each tap
  // is one open of the envelope's packet.
  function rain(ids) {
    const got = el("span", { id: "rain-got", "data-fen": "0", text: "¥0.00" });
    const hud = el("div", { class: "hud" }, el("span", {}, "红包雨 Rain · you got ", got), el("a", { href: "#/", text: "leave" }));
    const sky = el("div", { class: "rain", id: "rain" }, hud);
    view().replaceChildren(sky);
    let total = 0, n = 0, over = false;
    const amounts = new Map(); // packet -> amount the user got
    const spawn = () => {
      if (over || !document.body.contains(sky)) return stop();
      const id = ids[n++ % ids.length];
      const drop = el("button", { class: "drop", type: "button", "data-packet": id, "aria-label": "red packet" });
      drop.style.left = (4 + Math.random() * 80) + "%";
      drop.style.animationDuration = (2.6 + Math.random() * 2) + "s";
      drop.addEventListener("animationend", () => drop.remove());
      drop.addEventListener("pointerdown", (ev) => tap(ev, drop, id));
      sky.append(drop);
    };
    const timer = setInterval(spawn, 280);
    const stop = () => clearInterval(timer);
    const pop = (x, y, text) => {
      const p = el("div", { class: "pop", text });
      p.style.left = x + "px"; p.style.top = y + "px";
      sky.append(p);
      setTimeout(() => p.remove(), 1000);
    };
    const end = (text) => {
      over = true; stop();
      sky.append(el("div", { class: "card over", id: "rain-over" }, el("h2", { text: "The rain is over" }),
        el("p", { text: text }), el("p", { class: "total" }, el("small", { text: "¥" }), yuan(total)),
        el("a", { class: "btn red", href: "#/", text: "Back" })));
    };
    async function tap(ev, drop, id) {
      ev.preventDefault();
      const x = ev.clientX, y = ev.clientY;
      drop.remove();
      if (amounts.has(id)) return pop(x, y, "already ¥" + yuan(amounts.get(id)));
      try {
        const r = await call("POST", "/v1/packets/" + id + "/open");
        if (!amounts.has(id)) { amounts.set(id, r.amount); total += r.amount; }
        got.textContent = "¥" + yuan(total); got.dataset.fen = total;
        pop(x, y, (r.status === "opened" ? "+¥" : "already ¥") + yuan(r.amount));
      } catch (p) {
        if (handleAuth(p)) return;
        if (p.code === "sold_out" || p.code === "expired") {
          amounts.set(id, 0);
          if (ids.every((i) => amounts.has(i))) end(human(p));
          else pop(x, y, p.code === "sold_out" ? "all taken" : "expired");
        } else pop(x, y, p.code === "busy" || p.code === "rate_limited" ? "busy, tap again" : human(p));
      }
    }
  }

  // ---- routing ---------------------------------------------------------------

  function render(next) {
    if (next) location.hash = next;
    const route = location.hash.replace(/^#/, "") || "/";
    const who = $("#who");
    if (!session.token) {
      who.hidden = true;
      view().replaceChildren(signIn(location.hash || "#/"));
      return;
    }
    who.hidden = false;
    $("#who-name").textContent = "User " + session.user;
    $("#who-name").title = "User " + session.user;
    let m;
    if ((m = /^\/p\/(\d{1,19})$/.exec(route))) return packet(m[1]);
    if ((m = /^\/rain\/(\d{1,19}(?:,\d{1,19})*)$/.exec(route))) return rain(m[1].split(","));
    home();
  }

  document.addEventListener("DOMContentLoaded", () => {
    takeFragmentToken();
    $("#signout").addEventListener("click", () => { session.clear(); location.hash = "#/"; render(); });
    window.addEventListener("hashchange", () => render());
    render();
  });

  // Exposed for the browser tests of the money parsing and the messages.
  window.hongbao = { parseYuan, yuan, human };
})();
