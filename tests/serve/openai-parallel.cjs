// openai-parallel.cjs -- `loom serve -np 4` with the official `openai` npm client: requests streamed at
// the same time give the texts each gives alone (greedy output does not depend on batching), while a
// long stream shares the batches and is cancelled midway without disturbing them; the slots are
// free afterwards and /metrics saw batches of more than one token.
// usage: node openai-parallel.cjs OPENAI_PACKAGE_DIR BASE_URL API_KEY
const [pkg, base, key] = process.argv.slice(2);
const OpenAI = require(pkg);
let fails = 0;
function check(ok, what) {
  if (!ok) { console.log('FAIL: ' + what); fails++; }
}
const prompts = ['Once upon a time', 'The little dog', 'Lily and Ben went to the park', 'One day, a bird'];
const N = 60;

async function metrics() {
  const r = await fetch(base + '/metrics', {headers: {Authorization: 'Bearer ' + key}});
  const m = {};
  for (const line of (await r.text()).split('\n')) {
    const f = line.split(' ');
    if (f.length === 2 && !line.startsWith('#')) m[f[0]] = Number(f[1]);
  }
  return m;
}

async function streamText(client, prompt, onChunk) {
  const s = await client.completions.create({model: 'stories', prompt, max_tokens: N, temperature: 0, stream: true});
  let text = '', k = 0;
  for await (const ev of s) {
    text += ev.choices[0].text;
    if (onChunk) onChunk(++k);
  }
  return text;
}

async function main() {
  const client = new OpenAI({baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 60000});
  // each prompt alone, one after the other
  const alone = [];
  for (const p of prompts) {
    const c = await client.completions.create({model: 'stories', prompt: p, max_tokens: N, temperature: 0});
    alone.push(c.choices[0].text);
  }
  check(new Set(alone).size === prompts.length, 'the prompts should give different texts: ' + JSON.stringify(alone));

  // all four at once, whole and streamed
  const whole = await Promise.all(prompts.map((p) => client.completions.create({model: 'stories', prompt: p, max_tokens: N, temperature: 0})));
  whole.forEach((c, i) => check(c.choices[0].text === alone[i], `concurrent request ${i} differs: ${JSON.stringify(c.choices[0].text)} vs ${JSON.stringify(alone[i])}`));

  // a long stream holds a slot; three more stream beside it; it is cancelled once they are under way
  const m0 = await metrics();
  const long = await client.completions.create({model: 'stories', prompt: 'Once', max_tokens: 30000, temperature: 0, stream: true, ignore_eos: true});
  const it = long[Symbol.asyncIterator]();
  const first = await it.next();
  check(!first.done, 'the long stream sent nothing');
  let aborted = false;
  const cancel = () => { if (!aborted) { aborted = true; long.controller.abort(); } };
  const longDone = (async () => { try { while (!(await it.next()).done); } catch (e) { /* aborted */ } })();
  const texts = await Promise.all(prompts.slice(1).map((p) => streamText(client, p, (k) => { if (k === 5) cancel(); })));
  await longDone;
  check(aborted, 'the long stream was not cancelled');
  texts.forEach((t, i) => check(t === alone[i + 1], `stream ${i + 1} beside the cancelled one differs: ${JSON.stringify(t)} vs ${JSON.stringify(alone[i + 1])}`));

  // the cancelled slot is freed; batching happened
  let m = {};
  for (let i = 0; i < 100; i++) {
    m = await metrics();
    if (m['loom:requests_processing'] === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(m['loom:requests_processing'] === 0 && m['loom:slots_idle'] === 4 && m['loom:slots'] === 4, 'slots after the cancel: ' + JSON.stringify(m));
  // while the long stream ran, every step held its token and those of the others under way
  const d = m['loom:n_decode_total'] - m0['loom:n_decode_total'];
  const t = m['loom:n_tokens_per_decode'] * m['loom:n_decode_total'] - m0['loom:n_tokens_per_decode'] * m0['loom:n_decode_total'];
  check(d > 0 && t / d > 1.01, `no batch held more than one token: ${t} tokens in ${d} batches`);
  const h = await (await fetch(base + '/health')).json();
  check(h.status === 'ok' && h.slots_idle === 4 && h.slots_processing === 0, 'health: ' + JSON.stringify(h));
  // the prompt cache per slot: a follow-up that extends an earlier request's text takes the slot
  // holding it and evaluates only what is new, while the other slots hold other texts
  const native = async (body) => (await fetch(base + '/completion', {method: 'POST', headers: {Authorization: 'Bearer ' + key},
                                                                  body: JSON.stringify(body)})).json();
  const a = await native({prompt: prompts[2], n_predict: 20, temperature: 0, cache_prompt: true});
  await native({prompt: prompts[1], n_predict: 20, temperature: 0, cache_prompt: true});
  const b = await native({prompt: prompts[2] + a.content + ' The end.', n_predict: 8, temperature: 0, cache_prompt: true});
  check(b.id_slot === a.id_slot && b.timings.cache_n >= a.tokens_evaluated - 1 && b.timings.prompt_n + b.timings.cache_n === b.tokens_evaluated,
        `cache_prompt over 4 slots: first in slot ${a.id_slot} (${a.tokens_evaluated} tokens), follow-up in slot ${b.id_slot}: ` + JSON.stringify(b.timings));
  // and the server still answers as before
  const after = await client.completions.create({model: 'stories', prompt: prompts[0], max_tokens: N, temperature: 0});
  check(after.choices[0].text === alone[0], 'after the cancel: ' + JSON.stringify(after.choices[0].text));
}

main().then(() => {
  if (fails) { console.log(fails + ' failure(s)'); process.exit(1); }
  console.log('loom serve -np 4: all parallel openai client checks passed');
}, (e) => { console.log('FAIL: ' + (e && e.stack || e)); process.exit(1); });
