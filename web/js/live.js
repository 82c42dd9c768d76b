// The live metrics stream: GET /api/v1/metrics/live sends one "live" frame
// every second (each link direction's measured and reserved rate, every
// running transfer's throughput); see js/stream.js for the token and the
// reconnects.

import { ReconnectingStream } from './stream.js';

export class LiveStream extends ReconnectingStream {
  constructor({ status, onFrame, onClosed }) {
    super({
      path: 'api/v1/metrics/live?every=1s',
      label: 'metrics',
      onLabel: 'live',
      status,
      onClosed,
      maxBackoff: 30000,
      events: {
        live: (frame) => {
          if (!frame) return;
          this.frames++;
          this.status.dataset.frames = String(this.frames);
          onFrame(frame);
        },
      },
    });
    this.frames = 0;
  }
}
