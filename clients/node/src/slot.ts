// The Redis Cluster hash slot of a key: CRC16 (XMODEM) of its hash tag,
// modulo 16384, as the cluster specification defines it.

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The part of the key that is hashed: the first non-empty `{...}`, else the whole key. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

export function keySlot(key: string): number {
  return crc16(new TextEncoder().encode(hashTag(key))) % 16384;
}
