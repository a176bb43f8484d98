// The crew panel at `/`: pick a position or a group (or open a preset link), type a name, and
// work the lines: per line listen on/off, volume, a talk key (hold to talk, tap to latch), an
// activity light with who talks, a call button. Plain ES modules, no build step; Janus's library
// is served by control at /vendor/.
//
// This module starts the page; the work is in the others, one job each:
//   ui.js          the page's elements and its message areas
//   api.js         requests to control's API
//   session.js     the state they share: the session, its lines, the groups
//   settings.js    each line's listen and volume, remembered
//   lines.js       the lines' cards and state
//   keys.js        talk keys: pointer, Enter, digits and space
//   calls.js       the call button
//   events.js      the session's event stream: calls, the admin's holds, remote commands
//   remote.js      remote control: applying its commands, reporting the panel's state
//   microphone.js  the microphone and the meters' clock
//   program.js     program lines dimmed while someone is heard on another line
//   people.js      person keys, direct lines and the reply key
//   wake-lock.js   the screen kept on while connected
//   lifecycle.js   the page's state machine: joining, connected, reconnecting, ended
//   form.js        the join form
//   connection.js  one connection to Janus, a handle per line; audio.js the page's audio
//   rooms.js       one connection to partyline's own rooms (the token's engine `bridged`)
//
// Observable state, for people and for browser tests alike (no test-only code paths):
//   <html data-state="idle|joining|connected|reconnecting|kicked|error">
//   <html data-level-out="-23.4">  dBFS of the microphone (absent while there is none)
//   per line, <li data-line="GROUP_ID"> with
//     data-listen="on|off"                   off also on a talk-only line
//     data-talk="off|momentary|latched|remote"  absent on a listen-only line; remote: held on by
//                                            the panel's remote control (a control surface)
//     data-active="true|false"               someone else talks on it
//     data-talkers="Alice,Bob"               who
//     data-call="true|false"                 a call signal in the last 5 s
//     data-level-in="-31.0"                  dBFS of the line as heard (after listen and
//                                            volume; -100 silence; absent without a stream)
//     data-ended="removed"                   the admin took this line away (its card says so;
//                                            the other lines go on); absent otherwise
//     data-admin="muted|line-muted"          the admin muted this user on the line, or the whole
//                                            line: its talk key is refused (absent otherwise)
//     data-talk-refused="muted|line-muted"   the last press of its talk key was refused
//     data-released="surface-silent|admin"   the talk key was let go by control: its remote
//                                            control's surface went silent, or the admin
//     data-program="true"                    a program line (the show's sound; listen only);
//                                            absent on other lines
//     data-link="good|degraded|poor"         the line's link as control judged the panel's last
//                                            measure of it (every 5 s; absent before the first);
//                                            a warning under the line while it is not good
//     data-dimmed="true|false"               a program line dimmed (by the token's
//                                            programDimDb) while another line is heard or the
//                                            user talks; absent on other lines
//   <button id="announce" data-action="announce" data-talk="off|momentary|latched|remote">
//                                            the announce key (shown when the token gives one):
//                                            on while every talk line the admin does not hold talks
//     data-direct="Ann"                      a direct line (a private line to one person, opened
//                                            by a person key): the other end's name; absent on
//                                            a group's line; its card's data-action="close"
//                                            key closes it (declines, or hangs up)
//   <section id="people"> with, per person key (its position's talkTo, and with
//   crew.directCalls all everyone online), <button class="person" data-person="POSITION|IDENTITY"
//   data-online="true|false" data-talk="off|opening|momentary|latched|remote">, and the reply key
//   <button id="reply" data-talk="…" data-reply-to="NAME"> (hidden while nobody is to be replied to)
//   <html data-remote-applied="N">           commands of the remote control applied so far
//   and controls with data-action="listen|talk|volume|call"; the line's stream plays (muted:
//   the sound goes through the page's WebAudio gain) in the card's <audio class="line-audio">.
// Meters are the RMS of the last 2048 samples, rising at once and falling 30 dB/s.

import { initTheme } from '/common/theme.js';
import { initForm, loadChoices } from '/join/form.js';
import { initKeys } from '/join/keys.js';
import { leave, rejoin, setState } from '/join/lifecycle.js';
import { initPeopleKeys } from '/join/people.js';
import { startMeters } from '/join/microphone.js';
import { ui } from '/join/ui.js';

initTheme(ui.theme);
initKeys();
initPeopleKeys();
initForm();
ui.leave.addEventListener('click', () => {
  leave();
  loadChoices();
});
ui.rejoin.addEventListener('click', rejoin);
setState('idle', 'Not connected');
startMeters();
loadChoices();
