/* clefgate proof-of-work: find a counter such that SHA-256("<nonce>:<counter>") starts with
   `difficulty` zero bits. Runs as a Web Worker; on the page it only defines clefgatePow
   (the fallback when workers are unavailable). Self-contained: no imports, no network. */
"use strict";
var clefgatePow = (function () {
  var K = new Int32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);
  var W = new Int32Array(64);
  var msg = new Uint8Array(64);

  // First 32-bit word of SHA-256 over msg[0..len) (len < 56: one block is enough).
  function firstWord(len) {
    var i, a, b, c, d, e, f, g, h, t1, t2, x, y;
    for (i = 0; i < 16; i++) {
      W[i] = (msg[4 * i] << 24) | (msg[4 * i + 1] << 16) | (msg[4 * i + 2] << 8) | msg[4 * i + 3];
    }
    W[15] = len * 8;
    for (i = 16; i < 64; i++) {
      x = W[i - 15]; y = W[i - 2];
      W[i] = (W[i - 16] + (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) + W[i - 7] +
              (((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10))) | 0;
    }
    a = 0x6a09e667 | 0; b = 0xbb67ae85 | 0; c = 0x3c6ef372 | 0; d = 0xa54ff53a | 0;
    e = 0x510e527f | 0; f = 0x9b05688c | 0; g = 0x1f83d9ab | 0; h = 0x5be0cd19 | 0;
    for (i = 0; i < 64; i++) {
      t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) +
            ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
      t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
            ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    return (0x6a09e667 + a) >>> 0;
  }

  // Try counters start, start+step, ... for at most `budget` attempts.
  // Returns {found: counter} or {next: counter, tried: n}.
  return function search(nonce, difficulty, start, step, budget) {
    var p = nonce.length + 1, i, len, digits, n, counter = start, shift = 32 - difficulty;
    for (i = 0; i < nonce.length; i++) msg[i] = nonce.charCodeAt(i);
    msg[nonce.length] = 58; /* ":" */
    for (var tried = 0; tried < budget; tried++, counter += step) {
      n = counter; digits = 1;
      while (n >= 10) { n = Math.floor(n / 10); digits++; }
      n = counter;
      for (i = p + digits - 1; i >= p; i--) { msg[i] = 48 + (n % 10); n = Math.floor(n / 10); }
      len = p + digits;
      msg[len] = 0x80;
      for (i = len + 1; i < 64; i++) msg[i] = 0;
      if ((firstWord(len) >>> shift) === 0) return {found: counter};
    }
    return {next: counter, tried: tried};
  };
})();

if (typeof WorkerGlobalScope !== "undefined" && self instanceof WorkerGlobalScope) {
  self.onmessage = function (ev) {
    var job = ev.data, counter = job.start, r;
    for (;;) {
      r = clefgatePow(job.nonce, job.difficulty, counter, job.step, 50000);
      if (r.found !== undefined) { self.postMessage({found: r.found}); return; }
      self.postMessage({tried: r.tried});
      counter = r.next;
    }
  };
}
