// The schedule of an ordered split (split_mode=ordered): which item a ticket is. A split row
// block has `split` chunks; each is read once (its partial statistics) and written once (its
// output, once every chunk of its row block has been read). Tickets run in units of `split`:
// the reads of row blocks [0, lag), then the reads of row block lag + j beside the writes of
// row block j, then the writes of the last lag row blocks. So every read of a row block comes
// before its writes, and a write re-reads its chunk about `lag` row blocks of reads after it
// was read: what a block waits for always has a smaller ticket.
//
// Plain C++ marked KF_HD, embedded in kernel sources and compiled on the host for its test
// (device_code.h).

struct KfTicketItem {
  long long row_block;
  long long part;  // the chunk of the row block
  bool write;
};

// Row blocks between a chunk's read and its write: `lag_bytes` of them, rounded, at least 1,
// times lag_halves / 2, rounded half up, from 1 to all.
KF_HD long long kf_ticket_lag(long long row_blocks, long long block_bytes, long long lag_bytes,
                              int lag_halves) {
  const long long bytes = block_bytes > 0 ? block_bytes : 1;
  long long lag = (lag_bytes + bytes / 2) / bytes;
  lag = ((lag > 1 ? lag : 1) * lag_halves + 1) / 2;
  if (lag > row_blocks) lag = row_blocks;
  return lag > 1 ? lag : 1;
}

// Tickets in all: a read and a write of every chunk.
KF_HD unsigned long long kf_ticket_count(long long row_blocks, int split) {
  return 2ull * (unsigned long long)row_blocks * (unsigned long long)split;
}

// The item of ticket t < kf_ticket_count(row_blocks, split), for 1 <= lag <= row_blocks.
KF_HD KfTicketItem kf_ticket_item(unsigned long long t, long long row_blocks, long long lag,
                                  int split) {
  const long long unit = (long long)(t / (unsigned long long)split);
  const long long q = unit - lag;
  const long long pairs_end = 2 * (row_blocks - lag);
  KfTicketItem item;
  item.part = (long long)(t % (unsigned long long)split);
  item.write = q >= 0 && (q >= pairs_end || (q & 1) != 0);
  item.row_block = q < 0            ? unit
                   : q >= pairs_end ? unit - row_blocks
                   : item.write     ? q / 2
                                    : lag + q / 2;
  return item;
}
