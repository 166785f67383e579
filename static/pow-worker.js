// The proof of work (booking-time challenge and sign-in challenge), solved
// off the page's thread: find a nonce such that
// SHA-256(challenge + "|" + nonce) starts with `bits` zero bits (the
// server's token.LeadingZeroBits). Plain synchronous SHA-256 over ASCII:
// crypto.subtle is asynchronous per call, some hundred times slower for a
// quarter of a million small hashes, and missing outside secure contexts.
"use strict";
var K = [
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2];
var W = new Int32Array(64), H = new Int32Array(8), M = new Int32Array(16);

// sha256 hashes an ASCII string into H.
function sha256(s) {
  var l = s.length, n = ((l + 9 + 63) >> 6) << 4, w, i, j, t;
  if (M.length < n) M = new Int32Array(n);
  w = M;
  for (i = 0; i < n; i++) w[i] = 0;
  for (i = 0; i < l; i++) w[i >> 2] |= (s.charCodeAt(i) & 0xff) << (24 - (i & 3) * 8);
  w[l >> 2] |= 0x80 << (24 - (l & 3) * 8);
  w[n - 1] = l * 8;
  H[0] = 0x6a09e667; H[1] = 0xbb67ae85; H[2] = 0x3c6ef372; H[3] = 0xa54ff53a;
  H[4] = 0x510e527f; H[5] = 0x9b05688c; H[6] = 0x1f83d9ab; H[7] = 0x5be0cd19;
  for (j = 0; j < n; j += 16) {
    var a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], h = H[7];
    for (t = 0; t < 64; t++) {
      if (t < 16) {
        W[t] = w[j + t];
      } else {
        var x = W[t - 15], y = W[t - 2];
        W[t] = (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) +
          (((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10)) + W[t - 7] + W[t - 16] | 0;
      }
      var t1 = h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) +
        ((e & f) ^ (~e & g)) + K[t] + W[t] | 0;
      var t2 = (((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
        ((a & b) ^ (a & c) ^ (b & c)) | 0;
      h = g; g = f; f = e; e = d + t1 | 0; d = c; c = b; b = a; a = t1 + t2 | 0;
    }
    H[0] = H[0] + a | 0; H[1] = H[1] + b | 0; H[2] = H[2] + c | 0; H[3] = H[3] + d | 0;
    H[4] = H[4] + e | 0; H[5] = H[5] + f | 0; H[6] = H[6] + g | 0; H[7] = H[7] + h | 0;
  }
  return H;
}

function zeroBits(h) {
  var n = 0;
  for (var i = 0; i < h.length; i++) {
    if (h[i] !== 0) return n + Math.clz32(h[i]);
    n += 32;
  }
  return n;
}

self.onmessage = function (e) {
  var prefix = e.data.challenge + "|", bits = e.data.bits, expected = Math.pow(2, bits);
  for (var n = 0; ; n++) {
    if (zeroBits(sha256(prefix + n.toString(36))) >= bits) { self.postMessage({ nonce: n.toString(36) }); return; }
    // Progress is the chance of having finished by now, not a promise.
    if (n % 4096 === 0) self.postMessage({ progress: Math.min(99, Math.round(100 * (1 - Math.exp(-n / expected)))) });
  }
};
