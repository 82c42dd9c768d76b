// Live updates: the server-sent event stream GET /api/v1/events (see
// js/stream.js for the token and the reconnects). After a dropped stream
// the browser sends Last-Event-ID and the controller replays what was
// missed; a fresh stream after a refusal starts from now, so the page is
// told "reconnected" and fetches anew what it shows.

import { ReconnectingStream } from './stream.js';

export class Events extends ReconnectingStream {
  constructor({ status, onEvent, onClosed }) {
    super({
      path: 'api/v1/events',
      label: 'live updates',
      status,
      onClosed,
      maxBackoff: 60000,
      onOpen: (afterRefusal) => {
        if (afterRefusal) onEvent('reconnected', null);
      },
      events: {
        reservation: (d) => onEvent('reservation', d),
        exclusive: (d) => onEvent('exclusive', d),
        message: (d) => onEvent('message', d),
        // "missed": the controller no longer holds every event since the
        // last one this page saw, so the page reloads what it shows.
        missed: () => onEvent('missed', null),
      },
    });
  }
}
