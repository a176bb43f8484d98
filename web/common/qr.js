// QR codes of links (the admin's join links, the panel's remote-control link), drawn as SVG
// with qrcode-generator (served at /vendor/qrcode.js).

import qrcode from '/vendor/qrcode.js';

const SVG_NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  return el;
}

/**
 * Draws the QR code of `text` into `box` as an SVG: dark modules on white with the 4-module
 * quiet zone the standard asks for, whatever the page's theme (scanners want dark on light).
 */
export function drawQr(box, text) {
  const qr = qrcode(0, 'M'); // the smallest version that holds the text; ~15 % may be damaged
  qr.addData(text, 'Byte');
  qr.make();
  const n = qr.getModuleCount();
  const quiet = 4;
  let d = '';
  for (let row = 0; row < n; row += 1) {
    for (let col = 0; col < n; col += 1) {
      if (qr.isDark(row, col)) d += `M${col + quiet} ${row + quiet}h1v1h-1z`;
    }
  }
  const size = n + 2 * quiet;
  box.dataset.text = text;
  const image = svg('svg', { viewBox: `0 0 ${size} ${size}`, 'shape-rendering': 'crispEdges', 'aria-hidden': 'true' });
  image.append(svg('rect', { width: size, height: size, fill: '#fff' }), svg('path', { d, fill: '#000' }));
  box.replaceChildren(image);
}
