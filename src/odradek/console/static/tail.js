// The live tail page: follows /messages/tail's server-sent events (one JSON record per event),
// appends a row per record, and stops on the Stop button, the server's `end` event, or an error
// (never reconnecting by itself: a new stream starts at the end again).
(() => {
  const hex = (b64) => '0x' + Array.from(atob(b64), (c) => c.charCodeAt(0).toString(16).padStart(2, '0')).join('');
  const shown = (text, isBase64) => (text === null ? null : isBase64 ? hex(text) : text);
  // a cell as the browse page shows bytes: text, hex when not UTF-8, an italic null when missing
  const cell = (row, text, className, isBase64) => {
    const td = row.insertCell();
    if (className) td.className = className;
    if (text === null) {
      const i = document.createElement('i');
      i.textContent = 'null';
      td.appendChild(i);
    } else if (isBase64) {
      const span = document.createElement('span');
      span.className = 'hex';
      span.textContent = hex(text);
      td.appendChild(span);
    } else {
      td.textContent = text;
    }
    return td;
  };
  document.addEventListener('DOMContentLoaded', () => {
    const table = document.getElementById('tail');
    if (!table) return;
    const body = table.tBodies[0];
    const status = document.getElementById('tail-status');
    const stop = document.getElementById('tail-stop');
    let count = 0;
    const source = new EventSource(table.dataset.source);
    const finish = (text) => {
      source.close();
      stop.disabled = true;
      status.textContent = `${text} (${count} records)`;
    };
    source.addEventListener('start', () => { status.textContent = 'following'; });
    source.onmessage = (event) => {
      const r = JSON.parse(event.data);
      const row = body.insertRow();
      cell(row, String(r.partition), 'num');
      cell(row, String(r.offset), 'num');
      cell(row, r.time);
      cell(row, r.key, '', r.key_base64);
      cell(row, r.value, 'value', r.value_base64);
      cell(row, r.headers.map((h) => `${h.name}: ${shown(h.value, h.base64) ?? 'null'}`).join('\n'), 'headers');
      count += 1;
      status.textContent = `following (${count} records)`;
    };
    source.addEventListener('end', (event) => {
      const end = JSON.parse(event.data);
      finish(end.reason === 'limit' ? 'ended: record limit reached'
        : end.reason === 'time' ? 'ended: time limit reached' : `ended: ${end.reason}`);
    });
    source.onerror = () => finish('disconnected');
    stop.onclick = () => finish('stopped');
  });
})();
