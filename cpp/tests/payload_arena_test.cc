// PayloadArena's blocks: handed out first-fit, aligned, none beyond its
// size, taken back and merged with free neighbours so that the whole arena
// is one block again; OffsetOf only for ranges wholly inside.
#include "resound/local/payload_arena.h"

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

  std::printf("payload_arena_test: OK\n");
  return 0;
}
