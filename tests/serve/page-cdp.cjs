// page-cdp.cjs -- opens a page in headless Chromium over the DevTools protocol, waits (at most 60 s)
// until document.body.dataset.done is set, prints the assistant's text and writes a PNG screenshot.
// usage: node --experimental-websocket page-cdp.cjs CHROMIUM PROFILE_DIR URL SCREENSHOT.png
const {spawn} = require('child_process');
const fs = require('fs');
const [browser, profile, url, shot] = process.argv.slice(2);
const proc = spawn(browser, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--user-data-dir=' + profile,
                             '--remote-debugging-port=0', '--window-size=900,700', 'about:blank'], {stdio: ['ignore', 'ignore', 'pipe']});
const fail = (m) => { console.error(m); proc.kill('SIGKILL'); process.exit(1); };
setTimeout(() => fail('timed out'), 60000).unref();
let err = '';
proc.stderr.on('data', async (d) => {
  err += d;
  const m = err.match(/DevTools listening on (ws:\/\/\S+)/);
  if (!m || proc.started) return;
  proc.started = true;
  try { await drive(m[1]); } catch (e) { fail('FAIL: ' + e); }
});
async function drive(wsUrl) {
  const ws = new WebSocket(wsUrl);
  await new Promise((ok, no) => { ws.onopen = ok; ws.onerror = () => no(new Error('cannot connect to Chromium')); });
  let id = 0;
  const pending = new Map();
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
  };
  const call = (method, params = {}, sessionId) => new Promise((ok, no) => {
    const i = ++id;
    pending.set(i, (msg) => msg.error ? no(new Error(method + ': ' + msg.error.message)) : ok(msg.result));
    ws.send(JSON.stringify(Object.assign({id: i, method, params}, sessionId ? {sessionId} : {})));
  });
  const {targetId} = await call('Target.createTarget', {url});
  const {sessionId} = await call('Target.attachToTarget', {targetId, flatten: true});
  const evaluate = async (expr) => (await call('Runtime.evaluate', {expression: expr, returnByValue: true}, sessionId)).result.value;
  for (;;) {
    if (await evaluate('!!(document.body && document.body.dataset.done)')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const text = await evaluate("document.querySelector('.msg.assistant span:last-child').textContent");
  const png = await call('Page.captureScreenshot', {format: 'png'}, sessionId);
  fs.writeFileSync(shot, Buffer.from(png.data, 'base64'));
  process.stdout.write(text);
  proc.kill('SIGKILL');
  process.exit(0);
}
