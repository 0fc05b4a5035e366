// openai-client.cjs -- drives `loom serve` with the official `openai` npm client: chat, completions,
// streaming of both, and the errors the client turns into exceptions.
// usage: node openai-client.cjs OPENAI_PACKAGE_DIR BASE_URL API_KEY REFERENCE_TEXT_FILE PROMPT N
const [pkg, base, key, refFile, prompt, nStr] = process.argv.slice(2);
const OpenAI = require(pkg);
const fs = require('fs');
const ref = fs.readFileSync(refFile, 'utf8').replace(/\n$/, '');
const n = Number(nStr);
let fails = 0;
function check(ok, what) {
  if (!ok) { console.log('FAIL: ' + what); fails++; }
}

async function main() {
  const client = new OpenAI({baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 30000});
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === 'stories', 'models: ' + JSON.stringify(models.data));

  const c = await client.completions.create({model: 'stories', prompt, max_tokens: n, temperature: 0});
  check(c.choices[0].text === ref, 'completions greedy text differs from loom run: ' + JSON.stringify(c.choices[0].text));
  check(c.usage.completion_tokens === n && c.usage.total_tokens === c.usage.prompt_tokens + n, 'completions usage: ' + JSON.stringify(c.usage));

  const cs = await client.completions.create({model: 'stories', prompt, max_tokens: n, temperature: 0, stream: true});
  let text = '';
  for await (const ev of cs) text += ev.choices[0].text;
  check(text === ref, 'streamed completions differ from loom run: ' + JSON.stringify(text));

  const messages = [{role: 'system', content: 'You tell stories.'}, {role: 'user', content: 'Tell me a story about a cat.'}];
  const chat = await client.chat.completions.create({model: 'stories', messages, max_tokens: 30, temperature: 0, seed: 1});
  const reply = chat.choices[0].message.content;
  check(chat.object === 'chat.completion' && chat.choices[0].message.role === 'assistant' && typeof reply === 'string' && reply.length > 0,
        'chat: ' + JSON.stringify(chat));
  check(chat.usage.completion_tokens > 0 && chat.usage.completion_tokens <= 30, 'chat usage: ' + JSON.stringify(chat.usage));

  const stream = await client.chat.completions.create({model: 'stories', messages, max_tokens: 30, temperature: 0, stream: true});
  let streamed = '', chunks = 0, finish = null;
  for await (const ch of stream) {
    check(ch.object === 'chat.completion.chunk', 'chunk object: ' + ch.object);
    streamed += ch.choices[0].delta.content || '';
    if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    chunks++;
  }
  check(streamed === reply, 'the streamed chat reply differs from the whole one: ' + JSON.stringify(streamed) + ' vs ' + JSON.stringify(reply));
  check(chunks >= 2 && (finish === 'stop' || finish === 'length'), `chunks ${chunks}, finish_reason ${finish}`);

  // a sampled reply is reproducible with its seed
  const s1 = await client.completions.create({model: 'stories', prompt, max_tokens: n, temperature: 1, seed: 42});
  const s2 = await client.completions.create({model: 'stories', prompt, max_tokens: n, temperature: 1, seed: 42});
  check(s1.choices[0].text === s2.choices[0].text, 'the same seed gave different text');

  // errors come back as the client's exceptions with the status
  const bad = new OpenAI({baseURL: base + '/v1', apiKey: 'wrong', maxRetries: 0});
  try {
    await bad.completions.create({model: 'stories', prompt, max_tokens: 4});
    check(false, 'a wrong key was accepted');
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.status === 401, 'wrong key: ' + e);
  }
  try {
    await client.completions.create({model: 'stories', prompt: 'Once upon a time '.repeat(100), max_tokens: 4});
    check(false, 'a prompt longer than the context was accepted');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400 && /tokens/.test(e.message), 'too long: ' + e);
  }
  try {
    await client.chat.completions.create({model: 'stories', messages: [{role: 'user', content: 'x'}], temperature: 'hot'});
    check(false, 'a string temperature was accepted');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400, 'wrong type: ' + e);
  }
}

main().then(() => {
  if (fails) { console.log(fails + ' failure(s)'); process.exit(1); }
  console.log('loom serve: all openai client checks passed');
}, (e) => { console.log('FAIL: ' + (e && e.stack || e)); process.exit(1); });
