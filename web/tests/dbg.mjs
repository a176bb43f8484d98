import { Control, Person, launchBrowser, writeTone } from './harness.mjs';
const control = await Control.start(['Line X']);
const browser = await launchBrowser({ audioFile: await writeTone('/tmp/pb/440.wav', 440) });
try {
  const ann = await Person.open(browser, control.origin, 'Ann', { path: '/?groups=line-x' }); await ann.joinPreset();
  await ann.waitState('connected');
  await ann.control('line-x', 'talk').click();
  await new Promise(r => setTimeout(r, 3000));
  const j = control.janus;
  const sessions = (await j.admin({ janus: 'list_sessions' })).sessions;
  for (const s of sessions) {
    const handles = (await j.admin({ janus: 'list_handles', session_id: s })).handles;
    for (const h of handles) {
      const info = await j.admin({ janus: 'handle_info', session_id: s, handle_id: h });
      console.log(JSON.stringify(info.info?.plugin_specific), JSON.stringify(info.info?.webrtc?.media ?? info.info?.streams ?? Object.keys(info.info ?? {})).slice(0, 1500));
    }
  }
} finally { await browser.close(); await control.stop(); }
