// Every htmx request carries the session's CSRF token (the console refuses a change without it),
// and the "refresh every 5 s" box reloads the page while it is ticked (remembered per browser), but
// for a page that updates itself (the live tail, whose stream a reload would restart).
document.addEventListener('htmx:configRequest', (event) => {
  event.detail.headers['X-CSRF-Token'] = document.querySelector('meta[name=csrf-token]').content;
});
document.addEventListener('DOMContentLoaded', () => {
  const box = document.getElementById('refresh');
  if (!box) return;
  box.checked = localStorage.getItem('odradek-refresh') === 'on';
  box.onchange = () => localStorage.setItem('odradek-refresh', box.checked ? 'on' : 'off');
  if (document.getElementById('tail')) return;
  setTimeout(() => { if (box.checked) location.reload(); }, 5000);
});
