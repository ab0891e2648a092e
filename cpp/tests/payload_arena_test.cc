// PayloadArena's blocks: handed out first-fit, aligned, none beyond its
// size, taken back and merged with free neighbours so that the whole arena
// is one block again; OffsetOf only for ranges wholly inside; a burst's
// pages given back; nothing handed out in a forked child.
#include "resound/local/payload_arena.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "check.h"

int main() {
  using resound::local::PayloadArena;
  constexpr size_t kBytes = 1 << 20;
  PayloadArena arena(kBytes);
  RESOUND_CHECK(arena.size() == kBytes && arena.bytes_in_use() == 0);

  void* a = arena.Allocate(100);
  void* b = arena.Allocate(1000);
  void* c = arena.Allocate(200'000);
  RESOUND_CHECK(a != nullptr && b != nullptr && c != nullptr);
  for (void* block : {a, b, c}) {
    RESOUND_CHECK(reinterpret_cast<uintptr_t>(block) % PayloadArena::kGranularity == 0 && arena.Owns(block));
  }
  RESOUND_CHECK(arena.OffsetOf(a, 100) == 0u && arena.OffsetOf(b, 1000) == 128u);
  RESOUND_CHECK(!arena.OffsetOf(c, kBytes) && !arena.OffsetOf(&arena, 1) && !arena.Owns(&arena));
  RESOUND_CHECK(arena.bytes_in_use() == 128 + 1024 + 200'000);
  RESOUND_CHECK(arena.Allocate(kBytes) == nullptr && arena.Allocate(0) == nullptr);

  // Freed in the middle: the hole is reused by a block that fits it.
  arena.Free(b, 1000);
  void* d = arena.Allocate(512);
  RESOUND_CHECK(d == b);
  // Neighbours merge: freeing everything leaves one block of the whole size.
  arena.Free(a, 100);
  arena.Free(c, 200'000);
  arena.Free(d, 512);
  RESOUND_CHECK(arena.bytes_in_use() == 0);
  void* whole = arena.Allocate(kBytes);
  RESOUND_CHECK(whole != nullptr && arena.OffsetOf(whole, kBytes) == 0u);
  arena.Free(whole, kBytes);

  // Many blocks freed in a scattered order come back together too.
  std::vector<void*> blocks;
  while (void* block = arena.Allocate(4000)) blocks.push_back(block);
  RESOUND_CHECK(blocks.size() == kBytes / 4032);
  for (size_t i = 0; i < blocks.size(); i += 2) arena.Free(blocks[i], 4000);
  for (size_t i = 1; i < blocks.size(); i += 2) arena.Free(blocks[i], 4000);
  RESOUND_CHECK(arena.bytes_in_use() == 0 && arena.Allocate(kBytes) != nullptr);

  // After a burst, the free tail's pages go back to the system but for
  // kKeptFreeBytes; the next blocks reuse the arena from its start.
  PayloadArena large(size_t{512} << 20);
  std::vector<void*> burst;
  for (int i = 0; i < 250; ++i) burst.push_back(large.Allocate(400'000));
  RESOUND_CHECK(large.resident_bytes() == 250 * 400'000);
  for (void* block : burst) large.Free(block, 400'000);
  RESOUND_CHECK(large.bytes_in_use() == 0 && large.resident_bytes() <= PayloadArena::kKeptFreeBytes + 4096);
  void* again = large.Allocate(400'000);
  RESOUND_CHECK(large.OffsetOf(again, 400'000) == 0u);
  large.Free(again, 400'000);

  // A child that inherited the arena hands out nothing (its parent reuses
  // the blocks) and takes nothing back.
  const pid_t child = ::fork();
  RESOUND_CHECK(child >= 0);
  if (child == 0) ::_exit(!arena.MadeHere() && arena.Allocate(100) == nullptr ? 0 : 1);
  int status = 0;
  RESOUND_CHECK(::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  RESOUND_CHECK(arena.MadeHere());
  std::printf("payload_arena_test: OK\n");
  return 0;
}
