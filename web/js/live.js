// The live metrics stream: GET /api/v1/metrics/live sends one "live" frame
// every second (each link direction's measured and reserved rate, every
// running transfer's throughput). Like js/events.js it passes the token as
// ?access_token= (an EventSource cannot send headers), lets the browser
// resume dropped streams, and after a refusal retries with a backoff for
// as long as onClosed says the token is still good.

const MAX_BACKOFF_MS = 30000;

export class LiveStream {
  constructor({ status, onFrame, onClosed }) {
    this.status = status;
    this.onFrame = onFrame;
    this.onClosed = onClosed;
    this.es = null;
    this.timer = 0;
    this.backoff = 1000;
    this.frames = 0;
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
    this.setStatus('off', 'metrics: off');
  }

  connect() {
    const es = new EventSource(`api/v1/metrics/live?every=1s&access_token=${encodeURIComponent(this.token)}`);
    this.es = es;
    this.setStatus('connecting', 'metrics: connecting…');
    es.addEventListener('open', () => {
      this.backoff = 1000;
      this.setStatus('on', 'metrics: live');
    });
    es.addEventListener('live', (e) => {
      if (es !== this.es) return;
      let frame;
      try {
        frame = JSON.parse(e.data);
      } catch {
        return;
      }
      this.frames++;
      this.status.dataset.frames = String(this.frames);
      this.onFrame(frame);
    });
    es.addEventListener('error', async () => {
      if (es !== this.es) return;
      if (es.readyState !== EventSource.CLOSED) {
        this.setStatus('connecting', 'metrics: reconnecting…');
        return;
      }
      this.setStatus('off', 'metrics: lost; retrying');
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
