// A server-sent event stream of the controller, kept open. An EventSource
// cannot send headers, so the token goes as ?access_token= (the controller
// takes it on its stream routes only). The browser resumes a dropped
// stream by itself; when the controller refuses it outright (the
// EventSource is closed), this reconnects with a backoff for as long as
// onClosed says the token is still good. Its state shows in the status
// element as "<label>: connecting… / on / lost; retrying / off".

export class ReconnectingStream {
  // path: the route with its query, without the token; events: event name
  // → handler(parsed data) (data that is not JSON is skipped); onOpen(after
  // a refusal: bool) runs at each open; onLabel: the status text's prefix.
  constructor({ path, label, onLabel = 'on', status, events, onOpen = () => {}, onClosed, maxBackoff }) {
    Object.assign(this, { path, label, onLabel, status, events, onOpen, onClosed, maxBackoff });
    this.es = null;
    this.timer = 0;
    this.backoff = 1000;
  }

  start(token) {
    this.stop();
    this.token = token;
    this.connect();
  }

  stop() {
    clearTimeout(this.timer);
    if (this.es) this.es.close();
    this.es = null;
    this.setStatus('off', `${this.label}: off`);
  }

  connect() {
    const sep = this.path.includes('?') ? '&' : '?';
    const es = new EventSource(`${this.path}${sep}access_token=${encodeURIComponent(this.token)}`);
    this.es = es;
    this.setStatus('connecting', `${this.label}: connecting…`);
    es.addEventListener('open', () => {
      this.onOpen(this.backoff > 1000);
      this.backoff = 1000;
      this.setStatus('on', `${this.label}: ${this.onLabel}`);
    });
    for (const [name, handler] of Object.entries(this.events)) {
      es.addEventListener(name, (e) => {
        if (es !== this.es) return;
        let data = null;
        if (e.data) {
          try {
            data = JSON.parse(e.data);
          } catch {
            return; // a comment or keep-alive the server chose to send as data
          }
        }
        handler(data);
      });
    }
    es.addEventListener('error', async () => {
      if (es !== this.es) return;
      if (es.readyState !== EventSource.CLOSED) {
        this.setStatus('connecting', `${this.label}: reconnecting…`);
        return;
      }
      this.setStatus('off', `${this.label}: lost; retrying`);
      const again = await this.onClosed();
      if (!again || es !== this.es) return;
      this.timer = setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.maxBackoff, this.backoff * 2);
    });
  }

  setStatus(state, text) {
    this.status.dataset.state = state;
    this.status.textContent = text;
  }
}
