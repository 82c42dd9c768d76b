// Live updates: the server-sent event stream GET /api/v1/events. An
// EventSource cannot send headers, so the token goes as ?access_token=,
// which the controller accepts on this route only. The browser reconnects
// by itself after a dropped stream (sending Last-Event-ID, so the controller
// replays what was missed); when the controller refuses the stream
// outright (the EventSource is closed), this reconnects with a backoff and
// asks onClosed whether to go on (the token may have been revoked).

const MAX_BACKOFF_MS = 60000;

export class Events {
  constructor({ status, onEvent, onClosed }) {
    this.status = status;
    this.onEvent = onEvent;
    this.onClosed = onClosed;
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
    this.setStatus('off', 'live updates: off');
  }

  connect() {
    const es = new EventSource(`api/v1/events?access_token=${encodeURIComponent(this.token)}`);
    this.es = es;
    this.setStatus('connecting', 'live updates: connecting…');
    es.addEventListener('open', () => {
      // The browser resumes a dropped stream with Last-Event-ID and the
      // controller replays what it kept; a fresh stream after a refusal
      // starts from now, so what happened meanwhile is fetched anew.
      if (this.backoff > 1000) this.onEvent('reconnected', null);
      this.backoff = 1000;
      this.setStatus('on', 'live updates: on');
    });
    const handle = (kind) => (e) => {
      let data = null;
      try {
        data = JSON.parse(e.data);
      } catch {
        return; // a comment or keep-alive the server chose to send as data
      }
      this.onEvent(kind, data);
    };
    es.addEventListener('reservation', handle('reservation'));
    es.addEventListener('exclusive', handle('exclusive'));
    es.addEventListener('message', handle('message'));
    // "missed": the controller no longer holds every event since the last
    // one this page saw, so the page reloads what it shows.
    es.addEventListener('missed', () => this.onEvent('missed', null));
    es.addEventListener('error', async () => {
      if (es !== this.es) return;
      if (es.readyState !== EventSource.CLOSED) {
        this.setStatus('connecting', 'live updates: reconnecting…');
        return;
      }
      this.setStatus('off', 'live updates: lost; retrying');
      const again = await this.onClosed();
      if (!again || es !== this.es) return;
      this.timer = setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(MAX_BACKOFF_MS, this.backoff * 2);
    });
  }

  setStatus(state, text) {
    this.status.dataset.state = state;
    this.status.textContent = text;
  }
}
