/* The live page's script: polls the app's own API once a second and redraws. No framework, no
   build step. Every value from the API is put in the page as text (textContent), never as HTML.
   The function key comes from the page's own URL (?code=...), as Azure expects for a
   function-level route, and is sent to the API in the x-functions-key header. */
/* global document, window, location */
'use strict';

(function () {
  const POLL_MS = 1000;
  const apiBase = location.pathname.replace(/\/dashboard\/?$/, '');
  const key = new URLSearchParams(location.search).get('code');
  const $ = (id) => document.getElementById(id);
  const PAGE_SIZE = 50;
  let selectedJobId = jobIdFromHash();
  let lastOk = 0;
  let busy = false;
  /** The job list's pages: the continuation of each page shown so far (the first has none). */
  let pageTokens = [undefined];
  let nextToken;
  const workTypesSeen = new Set();

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (key) headers['x-functions-key'] = key;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(apiBase + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    const text = await res.text();
    let json = null;
    try {
      json = text === '' ? null : JSON.parse(text);
    } catch {
      json = null;
    }
    if (!res.ok) {
      if (res.status === 401 || res.status === 403) throw new ApiError(res.status, 'UNAUTHORIZED', 'This page needs a function key: open it as …/api/dashboard?code=<key> (a host key opens every route).');
      throw new ApiError(res.status, (json && json.code) || 'HTTP_' + res.status, (json && json.message) || 'The app answered ' + res.status + '.');
    }
    return json;
  }

  /** h('td', { class: 'num' }, 'text', node, ...): an element with attributes and text or node children. */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === 'class') el.className = value;
      else if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
      else el.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null) continue;
      el.append(child instanceof window.Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  const badge = (text) => h('span', { class: 'badge ' + text }, text);

  function ago(iso) {
    if (!iso) return '—';
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    return duration(s) + ' ago';
  }

  function duration(seconds) {
    const s = Math.round(seconds);
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + String(s % 60).padStart(2, '0') + ' s';
    if (s < 86400) return Math.floor(s / 3600) + ' h ' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + ' min';
    return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
  }

  /** Times in UTC, as the CLI and the API print them: today's as hh:mm:ss UTC, older ones with their date. */
  function time(iso) {
    if (!iso) return '—';
    const text = new Date(iso).toISOString();
    const clock = text.slice(11, 19) + ' UTC';
    return text.slice(0, 10) === new Date().toISOString().slice(0, 10) ? clock : text.slice(0, 10) + ' ' + clock;
  }

  /** Seconds from now until iso (negative: past). */
  function secondsUntil(iso) {
    return Math.round((Date.parse(iso) - Date.now()) / 1000);
  }

  /** A progress bar: done (green) then failed (red) on a grey track; the label says the numbers. */
  function progressBar(progress, big) {
    const items = progress && progress.items;
    const total = items ? items.total : 0;
    const done = items && total > 0 ? items.done / total : 0;
    const failed = items && total > 0 ? items.failed / total : 0;
    const fill = h('div', { class: 'done' });
    fill.style.width = (100 * Math.min(1, done)).toFixed(2) + '%';
    const bad = h('div', { class: 'failed' });
    bad.style.width = (100 * Math.min(1 - Math.min(1, done), failed)).toFixed(2) + '%';
    const bar = h('div', { class: big ? 'bar big' : 'bar', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': total, 'aria-valuenow': items ? items.done : 0, 'data-done': done.toFixed(4), 'data-failed': failed.toFixed(4) }, fill, bad);
    const label = items ? items.done + ' / ' + total + ' items' + (items.failed > 0 ? ', ' + items.failed + ' failed' : '') + ' (' + Math.floor(100 * done) + '%)' : 'not planned yet';
    return h('div', {}, bar, h('div', { class: 'bar-label' }, label));
  }

  /** What the page says while nobody visibly leads (the API's leadership: the lease holder and its heartbeat). */
  function takeoverText(l, timing) {
    const by = l.takeoverBy ? time(l.takeoverBy) : '—';
    const left = l.takeoverBy ? secondsUntil(l.takeoverBy) : 0;
    const when = l.overdue ? 'Expected by ' + by + ', overdue by ' + duration(-left) : 'Expected by ' + by + ' (in ' + duration(Math.max(0, left)) + ' at most)';
    const limit = 'A takeover takes up to L + retry period = ' + timing.leaseSeconds + ' + ' + timing.retryPeriodSeconds + ' = ' + timing.takeoverSeconds + ' s after the holder\'s last renewal.';
    let what;
    if (l.cause === 'lease-free') what = 'No leader: the lease is free and a follower is taking it.';
    else if (l.cause === 'holder-stepped-down') what = l.holder + ' stepped down and no longer renews; its lease lapses, then a follower takes over.';
    else what = l.holder + ' holds the lease but is not renewing: not heard from for ' + (l.lastHeardAt ? duration(-secondsUntil(l.lastHeardAt)) : 'ever') + ' (a leader beats every ' + timing.renewIntervalSeconds + ' s). If it died, its lease lapses and a follower takes over.';
    return { what, when, limit };
  }

  /** The answering instance's own storage requests per minute (the host's polling is not included). */
  function storageLine(r) {
    if (!r) return '—';
    const per = r.windowSeconds >= 60 ? r.perMinute : Math.round((r.perMinute * 60) / r.windowSeconds);
    return per + ' requests/min by this instance\'s app (blob ' + r.blob + ', queue ' + r.queue + ', table ' + r.table + (r.windowSeconds < 60 ? ', over ' + r.windowSeconds + ' s' : '') + '; the host\'s own polling not included)';
  }

  function renderLeader(cluster) {
    const l = cluster.leadership;
    const leaseHolder = l.holder !== null && l.holder === cluster.holder;
    const status = l.state === 'leading' ? badge('leading') : l.state === 'takeover' ? h('span', { class: 'badge takeover' }, 'takeover under way') : badge('none');
    const rows = [
      ['holder', l.holder || (l.state === 'none' ? '— (nobody has led yet)' : '— (nobody holds the lease)')],
      ['status', status],
      ['epoch', l.epoch === null ? '—' : l.epoch],
      ['since', leaseHolder && cluster.acquiredAt ? time(cluster.acquiredAt) + ' (' + ago(cluster.acquiredAt) + ')' : '—'],
      ['last heard', l.lastHeardAt ? time(l.lastHeardAt) + ' (' + ago(l.lastHeardAt) + ')' : '—'],
      ['lease', badge(cluster.leaseState)],
      ['answered by', cluster.instance.id + ' (' + cluster.instance.role + ', ' + cluster.instance.passes + ' passes)'],
      ['storage', storageLine(cluster.storageRequests)],
    ];
    if (cluster.instance.lastPassError) rows.push(['last pass error', cluster.instance.lastPassError.code + ': ' + cluster.instance.lastPassError.message]);
    $('leader').replaceChildren(...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-field': k }, v)]));
    const panel = $('takeover');
    panel.hidden = l.state !== 'takeover';
    panel.dataset.cause = l.cause || '';
    if (l.state === 'takeover') {
      const t = takeoverText(l, cluster.timing);
      panel.replaceChildren(h('strong', {}, 'Takeover under way. '), t.what + ' ', h('span', { class: 'when' }, t.when + '.'), ' ' + t.limit);
      panel.classList.toggle('overdue', l.overdue);
    }
    const note = $('jobs-note');
    note.hidden = l.state !== 'takeover';
    if (l.state === 'takeover') {
      const when = takeoverText(l, cluster.timing).when;
      note.textContent = 'No leader is coordinating: new jobs wait to start until a follower takes over (' + when.charAt(0).toLowerCase() + when.slice(1) + '). Running jobs go on; work that was on an instance that died is sent again after its timeout.';
    }
  }

  /** The role the page shows: the leader is the holder of the lease (leadership), not what an instance believes of itself. */
  function roleBadge(i, l) {
    if (i.id === l.holder) {
      if (l.state === 'leading') return badge('leader');
      return h('span', { class: 'badge takeover' }, l.cause === 'holder-stepped-down' ? 'stepping down' : 'holder, not renewing');
    }
    if (i.role === 'leader') return h('span', { class: 'badge ended', title: 'it last said it leads; someone else holds the lease' }, 'term ended');
    return badge(i.role);
  }

  function renderInstances(instances, l) {
    const rows = instances.map((i) =>
      h(
        'tr',
        { 'data-instance': i.id, 'data-state': i.state },
        h('td', {}, i.id),
        h('td', {}, roleBadge(i, l)),
        h('td', { class: 'num' }, i.epoch === null ? '—' : i.epoch),
        h('td', {}, badge(i.state)),
        h('td', { title: 'beats every ' + i.intervalSeconds + ' s; silent after ' + (2 * i.intervalSeconds + 1) + ' s without one' }, ago(i.lastSeenAt)),
        h('td', {}, time(i.startedAt)),
      ),
    );
    if (rows.length === 0) rows.push(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No instance has reported yet.')));
    $('instances').tBodies[0].replaceChildren(...rows);
  }

  function renderTerms(cluster) {
    const terms = cluster.terms;
    const rows = terms.map((t, index) => {
      const newer = index > 0 ? terms[index - 1] : undefined;
      let until;
      let ended;
      if (t.endedAt) {
        until = time(t.endedAt);
        ended = t.endReason;
      } else if (newer) {
        until = time(newer.acquiredAt);
        ended = 'replaced (no end recorded)';
      } else if (cluster.leadership.epoch === t.epoch && cluster.leadership.holder === t.holder) {
        until = 'now';
        ended = cluster.leadership.state === 'leading' ? 'leading' : 'not renewing';
      } else {
        until = '—';
        ended = 'lease ' + cluster.leaseState;
      }
      const end = t.endedAt || (newer && newer.acquiredAt) || (until === 'now' ? new Date().toISOString() : undefined);
      const held = end ? duration((Date.parse(end) - Date.parse(t.acquiredAt)) / 1000) : '—';
      return h('tr', { 'data-epoch': t.epoch }, h('td', { class: 'num' }, t.epoch), h('td', {}, t.holder), h('td', {}, time(t.acquiredAt)), h('td', {}, until), h('td', {}, held), h('td', {}, ended));
    });
    if (rows.length === 0) rows.push(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No term recorded yet.')));
    $('terms').tBodies[0].replaceChildren(...rows);
  }

  /** The progress cell: the bar, and a failed or rejected job's error code (the row's reason, without opening it). */
  function progressCell(j) {
    const code = j.errorCode ? h('span', { class: 'error-code', title: 'open the job for the message' }, j.errorCode) : null;
    const items = j.progress && j.progress.items;
    if (code && (!items || items.total === 0)) return code;
    return [progressBar(j.progress, false), code];
  }

  function renderJobs(jobs) {
    for (const j of jobs) if (j.workType) workTypesSeen.add(j.workType);
    $('worktypes').replaceChildren(...[...workTypesSeen].sort().map((w) => h('option', { value: w })));
    const rows = jobs.map((j) =>
      h(
        'tr',
        { class: 'job' + (j.jobId === selectedJobId ? ' selected' : ''), 'data-job': j.jobId, onclick: () => select(j.jobId) },
        h('td', {}, j.jobId),
        h('td', {}, j.workType || '—'),
        h('td', {}, badge(j.status)),
        h('td', {}, progressCell(j)),
        h('td', {}, ago(j.updatedAt)),
      ),
    );
    if (rows.length === 0) rows.push(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, pageTokens.length > 1 || filters() !== '' ? 'No jobs on this page for these filters.' : 'No jobs. Submit one with `npx coordinator submit job.json` or POST /api/jobs.')));
    $('jobs').tBodies[0].replaceChildren(...rows);
    const first = (pageTokens.length - 1) * PAGE_SIZE;
    $('page-label').textContent = jobs.length === 0 ? 'page ' + pageTokens.length : 'jobs ' + (first + 1) + '–' + (first + jobs.length) + ' (page ' + pageTokens.length + ')';
    $('newer').disabled = pageTokens.length === 1;
    $('older').disabled = !nextToken;
  }

  const QUEUE_LABELS = { jobs: 'submissions', 'jobs-poison': 'rejected submissions (poison)', 'work-items': 'work items (chunks)', 'work-items-poison': 'work items given up (poison)' };

  function renderQueues(view) {
    const note = $('queues-note');
    if (view instanceof Error) {
      note.textContent = 'Queue depths unavailable: ' + view.code + ': ' + view.message;
      return;
    }
    const rows = view.queues.map((q) =>
      h(
        'tr',
        { 'data-queue': q.role, class: q.role.endsWith('poison') && q.messages > 0 ? 'poison' : undefined },
        h('td', {}, QUEUE_LABELS[q.role] || q.role, h('span', { class: 'queue-name' }, q.name)),
        h('td', { class: 'num', 'data-messages': q.messages === null ? '' : q.messages }, q.messages === null ? 'not created yet' : q.messages),
      ),
    );
    $('queues').tBodies[0].replaceChildren(...rows);
    note.textContent = 'Approximate counts, read ' + ago(view.readAt) + ' (every 5 s at most).';
  }

  /** The list's filters as query parameters (the API checks them and answers a code for a bad one). */
  function filters() {
    const status = $('status-filter').value;
    const workType = $('worktype-filter').value.trim();
    return (status ? '&status=' + encodeURIComponent(status) : '') + (workType ? '&workType=' + encodeURIComponent(workType) : '');
  }

  function firstPage() {
    pageTokens = [undefined];
    void refresh();
  }

  /** The jobs per status, from the job index (the list answers them with ?counts=true). */
  function renderCounts(counts) {
    const el = $('job-counts');
    if (!counts) {
      el.textContent = '';
      return;
    }
    const parts = ['pending', 'running', 'completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected'].filter((s) => counts[s] > 0).map((s) => counts[s] + ' ' + s);
    el.textContent = counts.total + ' jobs' + (parts.length > 0 ? ': ' + parts.join(', ') : '');
    el.dataset.total = String(counts.total);
  }

  function renderJob(view) {
    $('job-card').hidden = false;
    $('job-title').textContent = 'Job ' + view.jobId;
    const p = view.progress;
    const facts = [
      ['status', badge(view.status)],
      ['work type', view.workType || '—'],
      ['phase', view.phase || '—'],
      ['chunks', p ? p.chunks.done + ' done, ' + p.chunks.failed + ' failed, of ' + p.chunks.total : '—'],
      ['items', p ? p.items.done + ' done, ' + p.items.failed + ' failed, of ' + p.items.total : '—'],
      ['epoch', view.epoch === null ? '—' : view.epoch],
      ['created', time(view.createdAt)],
      ['updated', time(view.updatedAt) + ' (' + ago(view.updatedAt) + ')'],
    ];
    // Where the outcome goes (docs/jobs.md, "Outcomes"): shown only for a job that asked for a reply.
    if (view.correlationId !== undefined) facts.push(['correlation id', view.correlationId]);
    if (view.delivery) facts.push(['delivery', deliveryText(view.delivery)]);
    const parts = [h('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', { 'data-field': k }, v)])), h('div', { id: 'job-progress' }, progressBar(p, true))];
    if (view.error) parts.push(h('h3', {}, 'Error'), h('pre', { id: 'job-error' }, view.error.code + ': ' + view.error.message));
    if (view.errors && view.errors.length > 0) parts.push(h('h3', {}, 'Errors (first ' + view.errors.length + ')'), h('pre', {}, view.errors.map((e) => e.code + ': ' + e.message).join('\n')));
    if (view.result !== undefined) parts.push(h('h3', {}, 'Result'), h('pre', { id: 'job-result' }, JSON.stringify(view.result, null, 2)));
    else if (view.resultUrl) parts.push(h('h3', {}, 'Result'), h('button', { type: 'button', id: 'load-result', onclick: () => loadResult(view.jobId) }, 'Load the full result'), h('div', { id: 'full-result' }));
    $('job').replaceChildren(...parts);
    $('cancel').disabled = !(view.status === 'pending' || view.status === 'running');
    $('resubmit').disabled = view.workType === null;
  }

  /** One line per target: 'reply job-replies: sent 09:00:04', 'callback hooks.example.com: retrying (2 tries; next 09:01:00; CALLBACK_HTTP_ERROR)'. */
  function deliveryText(delivery) {
    const line = (what, d) => {
      const notes = [];
      if (d.attempts > 1) notes.push(d.attempts + ' tries');
      if (d.nextAt) notes.push('next ' + time(d.nextAt));
      if (d.lastError && d.state !== 'sent' && d.state !== 'delivered') notes.push(d.lastError.code);
      return what + ': ' + d.state + (d.at && (d.state === 'sent' || d.state === 'delivered') ? ' ' + time(d.at) : '') + (notes.length > 0 ? ' (' + notes.join('; ') + ')' : '');
    };
    const lines = [];
    if (delivery.replyTo) lines.push(line('reply ' + delivery.replyTo.queue, delivery.replyTo));
    if (delivery.callback) lines.push(line('callback ' + delivery.callback.host, delivery.callback));
    return lines.join('\n');
  }

  async function loadResult(jobId) {
    const target = $('full-result');
    try {
      const doc = await api('GET', '/jobs/' + encodeURIComponent(jobId) + '/result');
      const text = JSON.stringify(doc, null, 2);
      const link = h('a', { href: URL.createObjectURL(new Blob([text], { type: 'application/json' })), download: jobId + '-result.json' }, 'Download');
      target.replaceChildren(link, h('pre', {}, text.length > 200000 ? text.slice(0, 200000) + '\n…' : text));
    } catch (err) {
      target.replaceChildren(h('p', { class: 'muted' }, err.message));
    }
  }

  function jobIdFromHash() {
    const match = /^#job=([A-Za-z0-9_-]{1,64})$/.exec(location.hash);
    return match ? match[1] : undefined;
  }

  function select(jobId) {
    selectedJobId = jobId;
    // The hash keeps the key out of it and makes the selection a link someone with a key can open.
    window.history.replaceState(null, '', location.pathname + location.search + (jobId ? '#job=' + jobId : ''));
    if (!jobId) $('job-card').hidden = true;
    void refresh();
  }

  /** kind 'fetch': a polling failure, cleared by the next good poll; others stay until the next action. */
  function banner(text, kind) {
    const el = $('banner');
    el.hidden = !text;
    el.textContent = text || '';
    el.dataset.kind = kind || '';
  }

  async function act(what, run) {
    const buttons = [$('cancel'), $('resubmit')];
    buttons.forEach((b) => (b.disabled = true));
    try {
      banner('');
      await run();
    } catch (err) {
      banner(what + ' failed: ' + err.code + ': ' + err.message);
    }
    await refresh();
  }

  $('cancel').addEventListener('click', () =>
    act('Cancel', async () => {
      await api('DELETE', '/jobs/' + encodeURIComponent(selectedJobId));
    }),
  );
  $('resubmit').addEventListener('click', () =>
    act('Resubmit', async () => {
      const submission = await api('GET', '/jobs/' + encodeURIComponent(selectedJobId) + '/submission');
      const accepted = await api('POST', '/jobs', submission);
      select(accepted.jobId);
    }),
  );
  $('close').addEventListener('click', () => select(undefined));
  $('status-filter').addEventListener('change', firstPage);
  $('worktype-filter').addEventListener('change', firstPage);
  $('older').addEventListener('click', () => {
    if (!nextToken) return;
    pageTokens.push(nextToken);
    void refresh();
  });
  $('newer').addEventListener('click', () => {
    if (pageTokens.length > 1) pageTokens.pop();
    void refresh();
  });
  window.addEventListener('hashchange', () => select(jobIdFromHash()));

  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const token = pageTokens[pageTokens.length - 1];
      const [cluster, list, queues, job] = await Promise.all([
        api('GET', '/cluster'),
        api('GET', '/jobs?counts=true&limit=' + PAGE_SIZE + filters() + (token ? '&continuation=' + encodeURIComponent(token) : '')).catch((err) => err),
        api('GET', '/queues').catch((err) => err),
        selectedJobId ? api('GET', '/jobs/' + encodeURIComponent(selectedJobId)).catch((err) => err) : Promise.resolve(undefined),
      ]);
      renderLeader(cluster);
      renderInstances(cluster.instances, cluster.leadership);
      renderTerms(cluster);
      if (list instanceof ApiError) {
        // A refused filter (INVALID_WORK_TYPE_FILTER, ...) leaves the rest of the page live.
        $('job-counts').textContent = list.code + ': ' + list.message;
        $('jobs').tBodies[0].replaceChildren();
      } else if (list instanceof Error) {
        throw list;
      } else {
        nextToken = list.continuation;
        renderJobs(list.jobs);
        renderCounts(list.counts);
      }
      renderQueues(queues);
      if (job instanceof Error) {
        $('job-card').hidden = false;
        $('job').replaceChildren(h('p', { class: 'muted' }, job.code + ': ' + job.message));
      } else if (job) renderJob(job);
      lastOk = Date.now();
      if ($('banner').dataset.kind === 'fetch') banner('');
    } catch (err) {
      banner(err instanceof ApiError ? err.code + ': ' + err.message : 'The app did not answer (' + err.message + '); retrying every second.', 'fetch');
    } finally {
      busy = false;
      const live = $('live');
      const fresh = lastOk > 0 && Date.now() - lastOk < 5 * POLL_MS;
      live.className = 'live ' + (fresh ? 'ok' : 'stale');
      live.textContent = lastOk > 0 ? 'updated ' + time(new Date(lastOk).toISOString()) : 'not connected';
    }
  }

  async function loop() {
    await refresh();
    setTimeout(loop, POLL_MS);
  }
  void loop();
})();
