// The portal's only script besides htmx (the Content-Security-Policy allows no inline script or handler):
// a confirmation before a form with data-confirm is submitted, the drawer's close button, and the copy buttons
// of the trace page (data-copy names the element whose text is copied).
"use strict";
document.addEventListener("submit", (ev) => {
  const form = ev.target;
  if (form instanceof HTMLFormElement && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    ev.preventDefault();
  }
});
document.addEventListener("click", (ev) => {
  const button = ev.target instanceof Element ? ev.target.closest("[data-close-drawer]") : null;
  if (button) {
    const drawer = document.getElementById("drawer");
    if (drawer) drawer.replaceChildren();
  }
});
// Times: the server writes <time datetime="…Z" title="… UTC">… UTC</time>; shown here in the browser's time
// zone with the zone's name (in the page's language), UTC kept as the tooltip. Again after htmx swaps content.
function localTimes(root) {
  const lang = document.documentElement.lang || "en";
  const options = {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
    hourCycle: "h23", timeZoneName: "short",
  };
  const fmt = new Intl.DateTimeFormat(lang, options);
  // "2026-12-05 16:00:00 GMT+8" in every language; only the zone's name follows the page's language
  const text = (when, parts) => {
    const p = Object.fromEntries(fmt.formatToParts(when).map((x) => [x.type, x.value]));
    return parts.map((k) => (/^[a-z]/i.test(k) ? p[k] ?? "" : k)).join("").trim();
  };
  const full = ["year", "-", "month", "-", "day", " ", "hour", ":", "minute", ":", "second", " ", "timeZoneName"];
  for (const el of root.querySelectorAll("time[datetime]:not([data-local])")) {
    const when = new Date(el.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) continue;
    el.textContent = text(when, full);
    el.dataset.local = "1";
  }
  // chart axis labels: shorter, the zone named on the label that named UTC
  for (const el of root.querySelectorAll("text[data-time]:not([data-local])")) {
    const when = new Date(el.getAttribute("data-time"));
    if (Number.isNaN(when.getTime())) continue;
    const zoned = el.textContent.endsWith(" UTC");
    el.textContent = text(when, ["month", "-", "day", " ", "hour", ":", "minute", ...(zoned ? [" ", "timeZoneName"] : [])]);
    el.setAttribute("data-local", "1");
  }
}
document.addEventListener("DOMContentLoaded", () => localTimes(document));
document.addEventListener("htmx:afterSettle", () => localTimes(document));
// Live traffic: picking a preset time window drops the end a Grafana link brought (a window up to now).
document.addEventListener("change", (ev) => {
  const select = ev.target;
  if (select instanceof HTMLSelectElement && select.name === "since") {
    const until = select.form ? select.form.querySelector("[name=until]") : null;
    if (until instanceof HTMLInputElement && select.value !== until.dataset.keepWith) until.value = "";
  }
});
document.addEventListener("click", (ev) => {
  const button = ev.target instanceof Element ? ev.target.closest("button[data-copy]") : null;
  if (!(button instanceof HTMLButtonElement)) return;
  const source = document.getElementById(button.dataset.copy || "");
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent || "").then(() => {
    if (button.dataset.copied) button.textContent = button.dataset.copied;
  });
});
// The review queue's keys: j / k move to the next / previous judgement, a / d press its Agree / Disagree.
(() => {
  const items = () => Array.from(document.querySelectorAll("[data-review] .review-item"));
  let current = -1;
  const select = (i) => {
    const all = items();
    if (!all.length) return;
    current = Math.max(0, Math.min(i, all.length - 1));
    all.forEach((el, k) => el.classList.toggle("current", k === current));
    all[current].focus({ preventScroll: true });
    all[current].scrollIntoView({ block: "nearest" });
  };
  document.addEventListener("DOMContentLoaded", () => {
    const all = items();
    if (!all.length) return;
    const open = all.findIndex((el) => !el.classList.contains("labelled"));
    select(open >= 0 ? open : 0);
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const target = ev.target;
    if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement) return;
    if (!document.querySelector("[data-review]")) return;
    if (ev.key === "j") select(current + 1);
    else if (ev.key === "k") select(current - 1);
    else if (ev.key === "a" || ev.key === "d") {
      const row = items()[current];
      const button = row ? row.querySelector(`button[data-verdict=${ev.key === "a" ? "agree" : "disagree"}]`) : null;
      if (button instanceof HTMLButtonElement) button.click();
    } else return;
    ev.preventDefault();
  });
})();
