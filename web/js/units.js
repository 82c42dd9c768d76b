// Rates, durations and times as the UI reads and shows them. parseRate
// follows internal/units.ParseRate (the project's contract for rates), so
// "500M", "1G", "10Gbps", "10gbit" and "1.5 Gbit/s" mean what they mean on
// the command line; the end-to-end test checks the two agree.

const PREFIX_POWER = { k: 1, m: 2, g: 3, t: 4, p: 5, e: 6 };
const RATE_SUFFIXES = new Set(['', 'b', 'bps', 'bit', 'bits', 'bit/s', 'bits/s', 'b/s']);
const MAX_U64 = (1n << 64n) - 1n;
const RATE_WANT = 'want a number with an optional SI prefix, like 500M or 10Gbps';

// UnitError is a value the user typed that does not parse.
export class UnitError extends Error {}

// splitNumber splits a leading unsigned decimal number from the rest.
function splitNumber(t) {
  const m = /^[0-9.]*/.exec(t)[0];
  const digits = m.replace(/\./g, '').length;
  const dots = m.length - digits;
  if (digits === 0 || dots > 1) return null;
  return [m, t.slice(m.length).trim()];
}

// scale multiplies the decimal string num by mult, rounding half up, exactly.
function scale(num, mult) {
  const [int, frac = ''] = num.split('.');
  const n = BigInt((int || '0') + frac);
  const d = 10n ** BigInt(frac.length);
  return (2n * n * mult + d) / (2n * d);
}

// parseRateExact parses a rate in bits per second to a BigInt.
export function parseRateExact(s) {
  const t = String(s).trim();
  if (t.startsWith('-')) {
    throw new UnitError(`invalid rate "${s}": want a non-negative number of bits per second, like 500M or 10Gbps`);
  }
  const split = splitNumber(t);
  if (!split) throw new UnitError(`invalid rate "${s}": ${RATE_WANT}`);
  let [num, rest] = split;
  const suffix = rest.replace(/^[kKmMgGtTpPeE]*/, '');
  if (suffix.startsWith('B') && !suffix.toLowerCase().startsWith('bit')) {
    throw new UnitError(`invalid rate "${s}": rates are bits per second and B means bytes: write 10G, 10Gbps or 10gbit`);
  }
  rest = rest.toLowerCase();
  let power = 0;
  if (rest !== '' && rest[0] in PREFIX_POWER) {
    power = PREFIX_POWER[rest[0]];
    rest = rest.slice(1);
  }
  if (!RATE_SUFFIXES.has(rest)) throw new UnitError(`invalid rate "${s}": ${RATE_WANT}`);
  const v = scale(num, 1000n ** BigInt(power));
  if (v > MAX_U64) throw new UnitError(`invalid rate "${s}": want at most 18.4 Ebit/s`);
  return v;
}

// parseRate parses a rate to a Number of bits per second, which is exact up
// to 9 Pbit/s: far more than any link a reservation can cross.
export function parseRate(s) {
  const v = parseRateExact(s);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new UnitError(`invalid rate "${s}": want at most 9 Pbit/s`);
  }
  return Number(v);
}

const RATE_UNITS = ['bit/s', 'kbit/s', 'Mbit/s', 'Gbit/s', 'Tbit/s', 'Pbit/s', 'Ebit/s'];

function threeDigits(v) {
  if (v < 9.995) return v.toFixed(2);
  if (v < 99.95) return v.toFixed(1);
  return v.toFixed(0);
}

// formatRate prints bits per second as internal/units.FormatRate does:
// "512 Mbit/s", "1.80 Gbit/s". parseRate reads it back.
export function formatRate(bps) {
  if (bps == null || !Number.isFinite(bps) || bps < 0) return '-- bit/s';
  if (bps < 999.5) return `${bps.toFixed(0)} bit/s`;
  let v = bps;
  let i = 0;
  while (i < RATE_UNITS.length - 1 && v >= 999.5) {
    v /= 1000;
    i++;
  }
  return `${threeDigits(v)} ${RATE_UNITS[i]}`;
}

// formatRateShort is formatRate without needless zeros, for chart axes:
// "500 M", "1.5 G".
export function formatRateShort(bps) {
  if (!bps) return '0';
  const units = ['', 'k', 'M', 'G', 'T', 'P', 'E'];
  let v = bps;
  let i = 0;
  while (i < units.length - 1 && Math.abs(v) >= 1000) {
    v /= 1000;
    i++;
  }
  return `${Number(v.toPrecision(3))} ${units[i]}`.trim();
}

const DURATION_UNITS = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 };

// parseDuration parses a Go duration ("90m", "1h30m", "1.5h") to
// milliseconds. The controller reads the same string with time.ParseDuration.
export function parseDuration(s) {
  const t = String(s).trim();
  const want = 'want a duration like 30m, 2h or 1h30m (for days, write hours: 48h)';
  if (t === '') throw new UnitError(`invalid duration "": ${want}`);
  if (t === '0') return 0;
  const re = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let ms = 0;
  let i = 0;
  while (i < t.length) {
    re.lastIndex = i;
    const m = re.exec(t);
    if (!m) throw new UnitError(`invalid duration "${s}": ${want}`);
    ms += parseFloat(m[1]) * DURATION_UNITS[m[2]];
    i = re.lastIndex;
  }
  return ms;
}

// formatDuration prints a length of time for people: "45m", "2h", "1h30m",
// "7d", "1d6h".
export function formatDuration(ms) {
  let s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  let out = '';
  if (d) out += `${d}d`;
  if (h) out += `${h}h`;
  if (m) out += `${m}m`;
  if (s && !d) out += `${s}s`;
  return out;
}

// goDuration writes milliseconds as a Go duration string in whole seconds,
// rounded down: "1h30m", "45m", "1m30s".
export function goDuration(ms) {
  let s = Math.max(1, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s ? `${s}s` : ''}`;
}

const TIME_FMT = new Intl.DateTimeFormat(undefined, {
  weekday: 'short', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit',
});
const TIME_ONLY_FMT = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });

// formatTime shows an instant in the browser's local time.
export function formatTime(t) {
  return TIME_FMT.format(new Date(t));
}

// formatWindow shows [start, end) in local time, with the day once when
// both ends fall on the same day.
export function formatWindow(start, end) {
  const a = new Date(start);
  const b = new Date(end);
  if (a.toDateString() === b.toDateString()) {
    return `${TIME_FMT.format(a)} – ${TIME_ONLY_FMT.format(b)}`;
  }
  return `${TIME_FMT.format(a)} – ${TIME_FMT.format(b)}`;
}

// utc is the title text of a shown time: the instant as a UTC ISO string.
export function utc(t) {
  return new Date(t).toISOString();
}

const pad = (n) => String(n).padStart(2, '0');

// toLocalInput writes a Date as a datetime-local input's value (local time,
// to the second).
export function toLocalInput(d) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}` +
    `T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// fromLocalInput reads a datetime-local input's value as local time.
export function fromLocalInput(v) {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?$/.exec(v);
  if (!m) return null;
  const ms = m[7] ? Math.round(Number(`0.${m[7]}`) * 1000) : 0;
  return new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0), ms);
}
