package fleet

import "github.com/redis/go-redis/v9"

// The server side of the lease protocol. Each script runs atomically in
// Redis and takes the time from Redis (TIME), never from a client. Amounts
// are integers: milli-tokens for a token bucket, milli-retries for a window
// (1000 per retry). See the package documentation for the protocol and the
// rules on a state built again.
//
// Fields of the state hash:
//
//	spec, gen                  the budget's spec and the generation of the state
//	ver                        the applied messages of this generation (a state that went back in time has a lower one than a process saw)
//	srv                        run_id of the Redis server that last applied a message
//	prob, fill                 end of the probation (ms; the pool grants nothing before), and whether the pool then fills to the capacity
//	peak, peak_at              the most live processes seen, and when (ms); forgotten after 10 lease TTLs
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

// syncHead opens both sync scripts: the arguments, the time, the server's
// identity and helpers. The arguments come in one, separated by newlines
// (A[1] … A[n]), so that the command has few elements: Redis answers a
// client that has not authenticated with a protocol error, not NOAUTH,
// when its command has more than ten.
//
//	KEYS   state, members, reclaimed
//	A      1 spec  2 id  3 seq  4 known gen  5 hold snapshot  6 want (target hold)
//	       7 lease ttl ms  8 state ttl ms  9 leave  10 reclaim memory ms
//	       11 highest ver seen in the known gen  12 live processes known
//	       13… by kind
const syncHead = `
local A = {}
for v in string.gmatch(ARGV[1] .. '\n', '([^\n]*)\n') do A[#A + 1] = v end
local st, mem, rec = KEYS[1], KEYS[2], KEYS[3]
local spec, id, seq, known = A[1], A[2], tonumber(A[3]), A[4]
local snap, want = tonumber(A[5]), tonumber(A[6])
local ttl, sttl, leave, rmem = tonumber(A[7]), tonumber(A[8]), A[9] == '1', tonumber(A[10])
local seen, mypeak = tonumber(A[11]), tonumber(A[12])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') or ''

local function num(v) return tonumber(v or '0') or 0 end
local function show(v)
  local s = string.gsub(string.sub(v, 1, 32), '[^%w%p ]', '?')
  return '"' .. s .. '"'
end
-- badints describes the first of the fields that holds anything but an
-- integer (a field may be missing)
local function badints(fields)
  if #fields == 0 then return nil end
  local v = redis.call('HMGET', st, unpack(fields))
  for i, f in ipairs(fields) do
    if v[i] then
      local x = tonumber(v[i])
      if not (x and x == math.floor(x) and x > -1e15 and x < 1e15) then return f .. ' = ' .. show(v[i]) end
    end
  end
  return nil
end
local function gentime(g)
  local s, u = string.match(g or '', '^(%d+)%.(%d+)%.')
  if not s then return 0 end
  return tonumber(s) * 1000000 + tonumber(u)
end
`

// syncState checks the state and builds it again when it must (through
// kindfields and deadfields, the integer fields of the kind and of a dead
// lease, which each script defines first): it sets gen, ver, note (what
// happened, for the process's log), frozen (the pool grants nothing) and
// fill (the pool fills to the capacity now).
const syncState = `
local function corrupt()
  local ty = redis.call('TYPE', st)['ok']
  if ty ~= 'hash' and ty ~= 'none' then return 'the key holds a ' .. ty end
  for _, k in ipairs({mem, rec}) do
    local kt = redis.call('TYPE', k)['ok']
    if kt ~= 'zset' and kt ~= 'none' then return k .. ' holds a ' .. kt end
  end
  if ty == 'none' then return nil end
  local v = redis.call('HMGET', st, 'spec', 'gen', 'g:' .. id)
  if not v[1] then return 'no spec' end
  if not (string.match(v[1], '^token%-bucket %d+ %d+/%d+/%d+ %d+ %a+$') or string.match(v[1], '^window %d+ %d+ %d+$')) then
    return 'spec = ' .. show(v[1])
  end
  if not v[2] or not string.match(v[2], '^%S+$') then return 'gen = ' .. show(v[2] or '') end
  if v[3] and not string.match(v[3], '^%-?%d+ %-?%d+$') then return 'g:' .. id .. ' = ' .. show(v[3]) end
  local fields = {'ver', 'prob', 'fill', 'peak', 'peak_at', 's:' .. id, 'h:' .. id}
  for _, f in ipairs(kindfields()) do fields[#fields + 1] = f end
  for _, c in ipairs(redis.call('ZRANGEBYSCORE', mem, '-inf', now)) do
    fields[#fields + 1] = 'h:' .. c
    for _, f in ipairs(deadfields(c)) do fields[#fields + 1] = f end
  end
  return badints(fields)
end

local why = corrupt()
local rebuilt = nil
if why then
  rebuilt = 'corrupt: ' .. why
  redis.call('DEL', st, mem, rec)
end
local cur = redis.call('HMGET', st, 'spec', 'gen', 'ver', 'srv')
if cur[1] and cur[1] ~= spec then
  local live = redis.call('ZCOUNT', mem, '(' .. now, '+inf')
  if live > 0 then
    return redis.error_reply('STORMGUARD_SPEC ' .. cur[1] .. ', in use by ' .. live .. ' live processes (this process: ' .. spec .. ')')
  end
  rebuilt = 'spec'
elseif cur[1] and known ~= '' and ((known == cur[2] and seen > num(cur[3])) or (known ~= cur[2] and gentime(known) > gentime(cur[2]))) then
  -- this process saw a newer state than Redis holds: a failover to a
  -- replica that lagged, or a restore from an old copy
  rebuilt = 'stale'
end
if rebuilt == 'spec' or rebuilt == 'stale' then
  redis.call('DEL', st, mem, rec)
  cur = {}
end

local gen, ver, note = cur[2], num(cur[3]), rebuilt or ''
if not cur[1] then
  local us = now_us
  if known ~= '' then us = math.max(us, gentime(known) + 1) end
  gen = string.format('%d.%06d.%s', math.floor(us / 1000000), us % 1000000, id)
  ver = 0
  redis.call('DEL', mem, rec)
  redis.call('HSET', st, 'spec', spec, 'gen', gen, 'srv', run)
  if known == '' and (rebuilt == nil or rebuilt == 'spec') then
    -- no process has told of an earlier state: a new budget. A token
    -- bucket fills after the probation unless a process of an earlier
    -- state reports meanwhile; a window starts empty, as a local one does.
    if kind == 'bucket' then redis.call('HSET', st, 'prob', now + ttl, 'fill', 1) end
    if note == '' then note = 'created' end
  elseif note == '' then
    note = 'lost'
  end
else
  if cur[4] ~= run then
    -- written by another server (a failover, or a restart that loaded a
    -- copy): it may be old, and only the processes can tell, given one
    -- whole probation from now. A probation the copy carries (one that
    -- ended on the old server before a round trip cleared it, or a new
    -- budget's) is extended to that, never kept as it is: kept, it may
    -- have ended already and the copy would grant at once. (No srv: a
    -- state of a stormguard that did not record it, trusted once.)
    if cur[4] then
      local p = tonumber(redis.call('HGET', st, 'prob') or '')
      if not p or p < now + ttl then redis.call('HSET', st, 'prob', now + ttl) end
      note = 'moved'
    end
    redis.call('HSET', st, 'srv', run)
  end
  if known ~= '' and known ~= gen then
    -- a process of an earlier state: this one was built again, not new
    redis.call('HDEL', st, 'fill')
  end
end
local prob = tonumber(redis.call('HGET', st, 'prob') or '')
local frozen = prob ~= nil and now < prob
local fill = false
if prob and not frozen then
  fill = redis.call('HGET', st, 'fill') == '1'
  redis.call('HDEL', st, 'prob', 'fill')
  if fill and note == '' then note = 'filled' end
end
`

// syncLeases expires dead leases (through reclaim, which each script
// defines first), forgets old bookkeeping, defines finish and record, and
// checks for a duplicate.
const syncLeases = `
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

local function finish(g, adj, a, b, dup, avail)
  local live = redis.call('ZCARD', mem)
  local pk = redis.call('HMGET', st, 'peak', 'peak_at')
  local peak, pat = num(pk[1]), num(pk[2])
  if now - pat > 10 * ttl then peak = 0 end
  if known ~= '' and known ~= gen and mypeak > peak then peak, pat = mypeak, now end
  if live >= peak then peak, pat = live, now end
  redis.call('HSET', st, 'peak', peak, 'peak_at', pat)
  if dup == 0 then ver = redis.call('HINCRBY', st, 'ver', 1) end
  redis.call('PEXPIRE', st, sttl)
  redis.call('PEXPIRE', mem, sttl)
  redis.call('PEXPIRE', rec, sttl)
  return {gen, g, adj, a, b, live, dup, now, ver, peak, avail, note}
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
local function answer()
  local g, adj = string.match(redis.call('HGET', st, 'g:' .. id) or '0 0', '^(%S+) (%S+)$')
  return tonumber(g), tonumber(adj)
end
`

// bucketScript is the token bucket's sync.
//
//	KEYS   state, members, reclaimed
//	A      1-12 as syncHead  13 capacity  14 credit  15 borrowed
//	reply  gen, grant, adj, pool, held, live processes, duplicate, server ms,
//	       ver, peak of live processes, grantable, note
var bucketScript = redis.NewScript(syncHead + `
local kind = 'bucket'
local cap, credit, borrowed = tonumber(A[13]), tonumber(A[14]), tonumber(A[15])
local pool, held = 0, 0
local function kindfields() return {'pool', 'held', 'x:' .. id} end
local function deadfields(c) return {} end
local function reclaim(c)
  local h = num(redis.call('HGET', st, 'h:' .. c))
  pool = pool + h
  held = held - h
  redis.call('HINCRBY', st, 'x:' .. c, h)
end
` + syncState + `
pool, held = num(redis.call('HGET', st, 'pool')), num(redis.call('HGET', st, 'held'))
if fill then pool = math.min(pool + cap, cap - held) end
` + syncLeases + `
local function grantable()
  if frozen then return 0 end
  return math.max(pool, 0)
end
if dup then
  local g, adj = answer()
  redis.call('HSET', st, 'pool', pool, 'held', held)
  return finish(g, adj, pool, held, 1, grantable())
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
  if pool > 0 and not frozen then g = math.min(want - h, pool) end
elseif h > 2 * want or (pool < 0 and h > want) then
  g = want - h
end
pool = pool - g
h = h + g
held = held + g
if leave then held = held - h end
record(g, adj, h)
redis.call('HSET', st, 'pool', pool, 'held', held)
return finish(g, adj, pool, held, 0, grantable())
`)

// windowScript is the window's sync.
//
//	KEYS   state, members, reclaimed
//	A      1-12 as syncHead (amounts in milli-retries)
//	       13 slot width µs  14 ratio (millionths)  15 floor per window (millionths of a retry)
//	       16 requests  17 fallback requests  18 fallback retries
//	reply  gen, grant, adj, requests in window, retries in window (milli), live processes,
//	       duplicate, server ms, ver, peak of live processes, grantable (milli), note
var windowScript = redis.NewScript(syncHead + `
local kind = 'window'
local width = tonumber(A[13])
local n = math.floor(now_us / width)
local first = n - 9
local function kindfields()
  local f = {'lo', 'ps:' .. id}
  for s = first, n do
    f[#f + 1] = 'sq:' .. s
    f[#f + 1] = 'sr:' .. s
  end
  return f
end
local function deadfields(c) return {'ps:' .. c} end
local function slotdec(s, v)
  if s < first or s > n or v <= 0 then return end
  local f = 'sr:' .. s
  local c = num(redis.call('HGET', st, f))
  redis.call('HSET', st, f, math.max(c - v, 0))
end
local function reclaim(c)
  local h = num(redis.call('HGET', st, 'h:' .. c))
  local ps = tonumber(redis.call('HGET', st, 'ps:' .. c) or '')
  if ps then slotdec(ps, h) end
end
` + syncState + syncLeases + `
local ratio, floor = tonumber(A[14]), tonumber(A[15])
local reqs, fbreqs, fbrets = tonumber(A[16]), tonumber(A[17]), tonumber(A[18])
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
local function grantable(q, r)
  if frozen then return 0 end
  return math.max(math.floor((ratio * q + floor) / 1000000) * 1000 - r, 0)
end
if dup then
  local g, adj = answer()
  local q, r = sums()
  return finish(g, adj, q, r, 1, grantable(q, r))
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
elseif want > u and avail >= 1000 and not frozen then
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
return finish(g, adj, q, r, 0, grantable(q, r))
`)

// peekScript reads a budget's state without changing it.
//
//	KEYS   state, members
//	ARGV   (none)
//	reply  spec, gen, a, b, live processes, server ms, probation end ms (0:
//	       none), ver, what is corrupt ("" if nothing) — a, b are pool and
//	       held for a token bucket; requests and milli-retries in the window
//	       for a window (whose slot width it reads from the spec)
var peekScript = redis.NewScript(`
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty == 'none' then return {false, false, 0, 0, 0, now, 0, 0, ''} end
if ty ~= 'hash' then return {false, false, 0, 0, 0, now, 0, 0, 'the key holds a ' .. ty} end
local function int(x)
  local y = tonumber(x or '0')
  if y and y == math.floor(y) and y > -1e15 and y < 1e15 then return y end
  return nil
end
local v = redis.call('HMGET', KEYS[1], 'spec', 'gen', 'pool', 'held', 'prob', 'ver')
if not v[1] then return {false, v[2] or false, 0, 0, 0, now, 0, 0, 'no spec'} end
local live = 0
if redis.call('TYPE', KEYS[2])['ok'] == 'zset' then live = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') end
local prob, ver = int(v[5]), int(v[6])
if not prob or not ver then return {v[1], v[2] or false, 0, 0, live, now, 0, 0, 'probation or version'} end
local width = tonumber(string.match(v[1], '^window (%d+)'))
local a, b
if not width then
  a, b = int(v[3]), int(v[4])
elseif width <= 0 then
  return {v[1], v[2] or false, 0, 0, live, now, prob, ver, 'slot width'}
else
  local n = math.floor(now_us / width)
  a, b = 0, 0
  for s = n - 9, n do
    local w = redis.call('HMGET', KEYS[1], 'sq:' .. s, 'sr:' .. s)
    local q, r = int(w[1]), int(w[2])
    if not q or not r then a = nil break end
    a, b = a + q, b + r
  end
end
if not a or not b then return {v[1], v[2] or false, 0, 0, live, now, prob, ver, 'a count'} end
return {v[1], v[2] or false, a, b, live, now, prob, ver, ''}
`)
