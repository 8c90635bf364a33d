package fleet

import "github.com/redis/go-redis/v9"

// The server side of the lease protocol. Each script runs atomically in
// Redis and takes the time from Redis (TIME), never from a client. Amounts
// are integers: milli-tokens for a token bucket, milli-retries for a window
// (1000 per retry). See the package documentation for the protocol.
//
// Fields of the state hash:
//
//	spec, gen                  the budget's spec and the generation of the state
//	pool, held                 token bucket: tokens in the pool, and held by all leases
//	lo, sq:N, sr:N             window: oldest slot kept; requests and retries of slot N
//	h:ID                       what process ID holds (its lease)
//	ps:ID                      window: the slot the lease's retries are counted in
//	s:ID, g:ID                 the last message applied from ID and its answer ("grant adj")
//	x:ID                       token bucket: what a reclaimed lease of ID held
//
// The members sorted set scores each live process by the expiry of its
// lease (ms); the reclaimed set scores processes whose lease expired or who
// left, so that their bookkeeping is forgotten after an hour.

// syncPrologue is the prologue of both sync scripts: time, expiry of dead leases
// (through reclaim, which each script defines first), forgetting old
// bookkeeping, and the duplicate check.
const syncPrologue = `
local st, mem, rec = KEYS[1], KEYS[2], KEYS[3]
local spec, id, seq, known = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local snap, want = tonumber(ARGV[5]), tonumber(ARGV[6])
local ttl, sttl, leave, rmem = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9] == '1', tonumber(ARGV[10])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)

local cur = redis.call('HMGET', st, 'spec', 'gen')
local gen = cur[2]
local created = false
if not cur[1] then
  gen = t[1] .. '.' .. t[2] .. '.' .. id
  redis.call('DEL', mem, rec)
  redis.call('HSET', st, 'spec', spec, 'gen', gen)
  created = true
elseif cur[1] ~= spec then
  return redis.error_reply('STORMGUARD_SPEC the key holds a budget of another spec: ' .. cur[1] .. ' (this process: ' .. spec .. ')')
end

local function num(v) return tonumber(v or '0') or 0 end

local dead = redis.call('ZRANGEBYSCORE', mem, '-inf', now)
for _, c in ipairs(dead) do
  reclaim(c)
  redis.call('HDEL', st, 'h:' .. c, 'ps:' .. c)
  redis.call('ZADD', rec, now, c)
end
if #dead > 0 then redis.call('ZREMRANGEBYSCORE', mem, '-inf', now) end
local old = redis.call('ZRANGEBYSCORE', rec, '-inf', now - rmem)
for _, c in ipairs(old) do redis.call('HDEL', st, 's:' .. c, 'g:' .. c, 'x:' .. c) end
if #old > 0 then redis.call('ZREMRANGEBYSCORE', rec, '-inf', now - rmem) end

local function finish(g, adj, a, b, dup)
  redis.call('PEXPIRE', st, sttl)
  redis.call('PEXPIRE', mem, sttl)
  redis.call('PEXPIRE', rec, sttl)
  return {gen, g, adj, a, b, redis.call('ZCARD', mem), dup, now}
end

local function record(g, adj, h)
  if leave then
    redis.call('HDEL', st, 'h:' .. id, 'ps:' .. id, 'x:' .. id)
    redis.call('HSET', st, 's:' .. id, seq, 'g:' .. id, g .. ' ' .. adj)
    redis.call('ZREM', mem, id)
    redis.call('ZADD', rec, now, id)
  else
    redis.call('HSET', st, 'h:' .. id, h, 's:' .. id, seq, 'g:' .. id, g .. ' ' .. adj)
    redis.call('ZADD', mem, now + ttl, id)
    redis.call('ZREM', rec, id)
  end
end

local last = num(redis.call('HGET', st, 's:' .. id))
local dup = seq <= last
`

// bucketScript is the token bucket's sync.
//
//	KEYS   state, members, reclaimed
//	ARGV   1 spec  2 id  3 seq  4 known gen  5 hold snapshot  6 want (target hold)
//	       7 lease ttl ms  8 state ttl ms  9 leave  10 reclaim memory ms
//	       11 capacity  12 credit  13 borrowed
//	reply  gen, grant, adj, pool, held, live processes, duplicate, server ms
var bucketScript = redis.NewScript(`
local pool, held
local function reclaim(c)
  local h = tonumber(redis.call('HGET', KEYS[1], 'h:' .. c) or '0') or 0
  pool = pool + h
  held = held - h
  redis.call('HINCRBY', KEYS[1], 'x:' .. c, h)
end
do
  local v = redis.call('HMGET', KEYS[1], 'pool', 'held', 'spec')
  local cap = tonumber(ARGV[11])
  if not v[3] then
    if ARGV[4] == '' then pool = cap else pool = 0 end
    held = 0
  else
    pool, held = tonumber(v[1] or '0'), tonumber(v[2] or '0')
  end
end
` + syncPrologue + `
local cap, credit, borrowed = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
if dup then
  local g, adj = string.match(redis.call('HGET', st, 'g:' .. id) or '0 0', '^(%S+) (%S+)$')
  redis.call('HSET', st, 'pool', pool, 'held', held)
  return finish(tonumber(g), tonumber(adj), pool, held, 1)
end
local oldh = num(redis.call('HGET', st, 'h:' .. id))
local adj = 0
if known == gen then
  adj = -borrowed - num(redis.call('HGET', st, 'x:' .. id))
end
redis.call('HDEL', st, 'x:' .. id)
local h = snap + adj
pool = pool + credit
held = held - oldh + h
if pool > cap - held then pool = cap - held end
local g = 0
if leave then
  g = -h
elseif want > h then
  if pool > 0 then g = math.min(want - h, pool) end
elseif h > 2 * want or (pool < 0 and h > want) then
  g = want - h
end
pool = pool - g
h = h + g
held = held + g
if leave then held = held - h end
record(g, adj, h)
redis.call('HSET', st, 'pool', pool, 'held', held)
return finish(g, adj, pool, held, 0)
`)

// windowScript is the window's sync.
//
//	KEYS   state, members, reclaimed
//	ARGV   1-10 as bucketScript (amounts in milli-retries)
//	       11 slot width µs  12 ratio (millionths)  13 floor per window (millionths of a retry)
//	       14 requests  15 fallback requests  16 fallback retries
//	reply  gen, grant, adj, requests in window, retries in window (milli), live processes, duplicate, server ms
var windowScript = redis.NewScript(`
local width = tonumber(ARGV[11])
local tt = redis.call('TIME')
local n = math.floor((tonumber(tt[1]) * 1000000 + tonumber(tt[2])) / width)
local first = n - 9
local function slotdec(s, v)
  if s < first or s > n or v <= 0 then return end
  local f = 'sr:' .. s
  local c = tonumber(redis.call('HGET', KEYS[1], f) or '0') or 0
  redis.call('HSET', KEYS[1], f, math.max(c - v, 0))
end
local function reclaim(c)
  local h = tonumber(redis.call('HGET', KEYS[1], 'h:' .. c) or '0') or 0
  local ps = tonumber(redis.call('HGET', KEYS[1], 'ps:' .. c) or '')
  if ps then slotdec(ps, h) end
end
` + syncPrologue + `
local ratio, floor = tonumber(ARGV[12]), tonumber(ARGV[13])
local reqs, fbreqs, fbrets = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local lo = tonumber(redis.call('HGET', st, 'lo') or '') or first
if lo < first then
  if first - lo > 64 then
    for _, k in ipairs(redis.call('HKEYS', st)) do
      local s = string.match(k, '^s[qr]:(%-?%d+)$')
      if s and tonumber(s) < first then redis.call('HDEL', st, k) end
    end
  else
    for s = lo, first - 1 do redis.call('HDEL', st, 'sq:' .. s, 'sr:' .. s) end
  end
end
redis.call('HSET', st, 'lo', first)
local function sums()
  local q, r = 0, 0
  for s = first, n do
    local v = redis.call('HMGET', st, 'sq:' .. s, 'sr:' .. s)
    q = q + num(v[1])
    r = r + num(v[2])
  end
  return q, r
end
if dup then
  local g, adj = string.match(redis.call('HGET', st, 'g:' .. id) or '0 0', '^(%S+) (%S+)$')
  local q, r = sums()
  return finish(tonumber(g), tonumber(adj), q, r, 1)
end
local cur = 'sr:' .. n
-- the retries of this lease that were not used move to the current slot
local oldh = num(redis.call('HGET', st, 'h:' .. id))
local ps = tonumber(redis.call('HGET', st, 'ps:' .. id) or '')
local u = math.max(snap, 0)
if ps then slotdec(ps, math.min(u, math.max(oldh, 0))) end
-- a negative snapshot: retries made with grants that were taken back
local adj = 0
if snap < 0 then adj = -snap end
redis.call('HINCRBY', st, cur, u + adj + fbrets * 1000)
redis.call('HINCRBY', st, 'sq:' .. n, reqs + fbreqs)
local q, r = sums()
local allowed = math.floor((ratio * q + floor) / 1000000) * 1000
local avail = allowed - r
local g = 0
if leave then
  g = -u
elseif want > u and avail >= 1000 then
  g = math.min(want - u, math.floor(avail / 1000) * 1000)
elseif avail < 0 and u > 0 then
  g = -math.min(u, math.ceil(-avail / 1000) * 1000)
elseif u > 2 * want then
  g = want - u
end
if g ~= 0 then
  if g > 0 then redis.call('HINCRBY', st, cur, g) else slotdec(n, -g) end
  r = r + g
end
record(g, adj, u + g)
redis.call('HSET', st, 'ps:' .. id, n)
if leave then redis.call('HDEL', st, 'ps:' .. id) end
return finish(g, adj, q, r, 0)
`)

// peekScript reads a budget's state without changing it.
//
//	KEYS   state, members
//	ARGV   (none)
//	reply  spec, gen, a, b, live processes, server ms — a, b are pool and
//	       held for a token bucket; requests and milli-retries in the window
//	       for a window (whose slot width it reads from the spec)
var peekScript = redis.NewScript(`
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local v = redis.call('HMGET', KEYS[1], 'spec', 'gen', 'pool', 'held')
if not v[1] then return {false, false, 0, 0, 0, now} end
local live = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
local width = tonumber(string.match(v[1], '^window (%d+)'))
if not width then
  return {v[1], v[2], tonumber(v[3] or '0'), tonumber(v[4] or '0'), live, now}
end
local n = math.floor(now_us / width)
local q, r = 0, 0
for s = n - 9, n do
  local w = redis.call('HMGET', KEYS[1], 'sq:' .. s, 'sr:' .. s)
  q = q + tonumber(w[1] or '0')
  r = r + tonumber(w[2] or '0')
end
return {v[1], v[2], q, r, live, now}
`)
