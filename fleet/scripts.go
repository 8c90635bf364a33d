package fleet

import "github.com/redis/go-redis/v9"

// stepScript is the server side of the protocol: it mirrors alloc.Step line
// for line, in Redis, atomically, with the time and the server's identity
// from Redis (TIME, INFO server's run_id). TestScriptMatchesCore feeds it
// and alloc.Step the same random message sequences and compares every
// answer and the states they leave. Amounts are integers (milli-units),
// times microseconds.
//
// Keys (one hash slot: they share {KEY}):
//
//	KEYS[1] stormguard:budget:{KEY}          the state (a hash)
//	KEYS[2] stormguard:budget:{KEY}:members  processes by when last heard from (µs)
//	KEYS[3] stormguard:budget:{KEY}:waiting  processes whose need went unmet, by when that lapses (µs)
//
// Fields of the state hash:
//
//	spec, gen, ver, srv, clock   the budget's spec, its generation, the messages applied, the run_id of the server that last applied one, the latest time seen
//	level                        bucket: milli-tokens in the pool
//	since                        since when processes have been waiting for the pool (µs; absent: none is)
//	lo, q:N, r:N                 window: the oldest slot kept; requests and milli-retries granted in slot N
//	s:ID, a:ID                   the last message applied from process ID, and its answer ("grant next")
//
// ARGV[1] holds the arguments, one a line (so that the command has few
// elements: Redis answers a client that has not authenticated with a
// protocol error, not NOAUTH, when its command has more than ten):
//
//	1 spec  2 kind (1 bucket, 2 window)  3 capacity  4 slot µs  5 ratio (millionths)  6 floor (millionths)
//	7 rate  8 min next µs  9 max next µs  10 live µs  11 max processes  12 state ttl ms
//	13 id  14 seq  15 known gen  16 seen ver  17 credit  18 need  19 want  20 leave (0/1)
//	21 time µs ("" in production: Redis's TIME; set by the differential test)
//	22 span ms  23 room  24 back  25 hold µs  26 age ms
//
// Reply: gen, ver, grant, next, avail, live, waiting, lost, dup (0/1), now,
// note. Error:
// "STORMGUARD_SPEC <live processes> <spec held>".
var stepScript = redis.NewScript(`
local A = {}
for v in string.gmatch(ARGV[1] .. '\n', '([^\n]*)\n') do A[#A + 1] = v end
local st, mem, wait = KEYS[1], KEYS[2], KEYS[3]
local spec, bucket = A[1], A[2] == '1'
local cap, slot, ratio, floor = tonumber(A[3]), tonumber(A[4]), tonumber(A[5]), tonumber(A[6])
local rate, minnext, maxnext = tonumber(A[7]), tonumber(A[8]), tonumber(A[9])
local live, maxprocs, sttl = tonumber(A[10]), tonumber(A[11]), tonumber(A[12])
local id, seq, known, seen = A[13], tonumber(A[14]), A[15], tonumber(A[16])
local credit, need, want, leave = tonumber(A[17]), tonumber(A[18]), tonumber(A[19]), A[20] == '1'
local span, room, back, hold, age = tonumber(A[22]), tonumber(A[23]), tonumber(A[24]), tonumber(A[25]), tonumber(A[26])
local now
if A[21] ~= '' then
  now = tonumber(A[21])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') or ''
local forgetlimit = 100

local function num(v) return tonumber(v or '0') or 0 end
local function show(v)
  return '"' .. string.gsub(string.sub(v, 1, 32), '[^%w%p ]', '?') .. '"'
end
local function isint(v)
  local x = tonumber(v)
  return x ~= nil and x == math.floor(x) and x > -1e16 and x < 1e16
end

-- corrupt describes what in the state cannot be read, or returns nil.
local function corrupt()
  local ty = redis.call('TYPE', st)['ok']
  if ty ~= 'hash' and ty ~= 'none' then return 'the key holds a ' .. ty end
  for _, k in ipairs({mem, wait}) do
    local kt = redis.call('TYPE', k)['ok']
    if kt ~= 'zset' and kt ~= 'none' then return k .. ' holds a ' .. kt end
  end
  if ty == 'none' then return nil end
  local v = redis.call('HMGET', st, 'spec', 'gen', 'srv', 'a:' .. id)
  if not v[1] then return 'no spec' end
  if not string.match(v[1], '^[%w%p ]+$') then return 'spec = ' .. show(v[1]) end
  if not v[2] or not string.match(v[2], '^%S+$') then return 'gen = ' .. show(v[2] or '') end
  if v[3] and not string.match(v[3], '^%w*$') then return 'srv = ' .. show(v[3]) end
  if v[4] and not string.match(v[4], '^%-?%d+ %-?%d+$') then return 'a:' .. id .. ' = ' .. show(v[4]) end
  local fields = {'ver', 'clock', 'level', 'lo', 'since', 's:' .. id}
  if not bucket then
    local n = math.floor(math.max(now, num(redis.call('HGET', st, 'clock'))) / slot)
    for k = n - 9, n do
      fields[#fields + 1] = 'q:' .. k
      fields[#fields + 1] = 'r:' .. k
    end
  end
  local w = redis.call('HMGET', st, unpack(fields))
  for i, f in ipairs(fields) do
    if w[i] and not isint(w[i]) then return f .. ' = ' .. show(w[i]) end
  end
  return nil
end

local function forget(c)
  redis.call('HDEL', st, 's:' .. c, 'a:' .. c)
  redis.call('ZREM', wait, c)
end

local function trim()
  local first = math.floor(now / slot) - 9
  local lo = tonumber(redis.call('HGET', st, 'lo') or '') or first
  if lo < first then
    if first - lo > 64 then
      for _, k in ipairs(redis.call('HKEYS', st)) do
        local s = string.match(k, '^[qr]:(%-?%d+)$')
        if s and tonumber(s) < first then redis.call('HDEL', st, k) end
      end
    else
      for k = lo, first - 1 do redis.call('HDEL', st, 'q:' .. k, 'r:' .. k) end
    end
  end
  redis.call('HSET', st, 'lo', math.max(lo, first))
end

local function avail()
  if bucket then return math.max(num(redis.call('HGET', st, 'level')), 0) end
  local n = math.floor(now / slot)
  local q, r = 0, 0
  for k = n - 9, n do
    local v = redis.call('HMGET', st, 'q:' .. k, 'r:' .. k)
    q = q + num(v[1])
    r = r + num(v[2])
  end
  return math.max(math.floor((ratio * q + floor) / 1000000) * 1000 - r, 0)
end

local function drain()
  if bucket then
    redis.call('HSET', st, 'level', 0)
  else
    trim()
    local a = avail()
    if a > 0 then redis.call('HINCRBY', st, 'r:' .. math.floor(now / slot), a) end
  end
end

local function touch(c)
  redis.call('ZADD', mem, now, c)
  local over = redis.call('ZCARD', mem) - maxprocs
  if over > 0 then
    local p = redis.call('ZPOPMIN', mem, math.min(over, forgetlimit))
    for i = 1, #p, 2 do forget(p[i]) end
  end
end

local function finish(gen, ver, grant, nx, lost, dup, note)
  redis.call('PEXPIRE', st, sttl)
  redis.call('PEXPIRE', mem, sttl)
  redis.call('PEXPIRE', wait, sttl)
  return {gen, ver, grant, nx, avail(), redis.call('ZCARD', mem), redis.call('ZCARD', wait), lost, dup, now, note}
end

-- counted is the part of a bucket's credit and back that counts, and what
-- was offered (see alloc's State.counted)
local function counted()
  local c = math.min(math.max(credit, 0), 1000000000)
  local b = math.min(math.max(back, 0), 1000000000)
  local r = math.max(room, 0)
  local sp = math.min(math.max(span, 0), 4194304)
  local ag = math.min(math.max(age, 0), sp)
  local since = num(redis.call('HGET', st, 'since'))
  if since == 0 then return math.min(c, r) + b, c + b end
  local waited = math.floor((now - since) / 1000)
  local length = sp - ag
  local during
  if waited <= ag then
    during = 0
  elseif length == 0 or waited >= sp then
    during = length
  else
    during = waited - ag
  end
  if during == length then return c + b, c + b end
  local before = c - math.floor(c * during / length)
  return math.floor((c + b) * during / length) + math.min(before, r), c + b
end

local note = ''
local why = corrupt()
if why then
  redis.call('DEL', st, mem, wait)
end
local cur = redis.call('HMGET', st, 'spec', 'gen', 'ver', 'srv', 'clock')
local exists = cur[1] ~= false
if exists then
  now = math.max(now, num(cur[5]))
  for _, c in ipairs(redis.call('ZRANGEBYSCORE', mem, '-inf', now - live, 'LIMIT', 0, forgetlimit)) do
    forget(c)
    redis.call('ZREM', mem, c)
  end
end
if exists and cur[1] ~= spec then
  local n = redis.call('ZCARD', mem)
  if n > 0 then
    return redis.error_reply('STORMGUARD_SPEC ' .. n .. ' ' .. cur[1])
  end
  redis.call('DEL', st, mem, wait)
  exists = false
  note = 'spec'
end
local gen, ver
if not exists then
  gen = string.format('%d', now) .. '.' .. id
  ver = 0
  redis.call('DEL', mem, wait)
  redis.call('HSET', st, 'spec', spec, 'gen', gen, 'ver', 0, 'srv', run, 'clock', now)
  if bucket then
    redis.call('HSET', st, 'level', 0)
  else
    redis.call('HSET', st, 'lo', math.floor(now / slot) - 9)
  end
  drain()
  if note == '' then
    if known == '' then note = 'created' else note = 'lost' end
  end
else
  gen, ver = cur[2], num(cur[3])
  if cur[4] ~= run then
    drain()
    redis.call('HSET', st, 'srv', run)
    note = 'moved'
  end
  if known == gen and seen > ver then
    drain()
    note = 'stale'
  end
end
if why then note = 'corrupt: ' .. why end
redis.call('HSET', st, 'clock', now)

if not bucket then trim() end
redis.call('ZREMRANGEBYSCORE', wait, '-inf', now)
if redis.call('ZCARD', wait) == 0 then redis.call('HDEL', st, 'since') end

local last = tonumber(redis.call('HGET', st, 's:' .. id) or '')
if last and seq <= last then
  touch(id)
  local g, nx = string.match(redis.call('HGET', st, 'a:' .. id) or '0 0', '^(%S+) (%S+)$')
  return finish(gen, ver, tonumber(g), tonumber(nx), 0, 1, note)
end

local lost = 0
if bucket then
  local c, offered = counted()
  lost = offered - c
  redis.call('HSET', st, 'level', math.min(cap, num(redis.call('HGET', st, 'level')) + c))
else
  redis.call('HINCRBY', st, 'q:' .. math.floor(now / slot), math.max(credit, 0))
end
ver = redis.call('HINCRBY', st, 'ver', 1)

if leave then
  forget(id)
  redis.call('ZREM', mem, id)
  return finish(gen, ver, 0, 0, lost, 0, note)
end

local a = avail()
local grant = 0
if need > 0 and a >= need then
  grant = math.min(math.max(want, need), a)
  if bucket then
    redis.call('HSET', st, 'level', num(redis.call('HGET', st, 'level')) - grant)
  else
    redis.call('HINCRBY', st, 'r:' .. math.floor(now / slot), grant)
  end
end

local nx = 0
if need > 0 and (grant == 0 or avail() < need) then
  if redis.call('ZCARD', wait) == 0 then redis.call('HSET', st, 'since', now) end
  redis.call('ZADD', wait, now, id)
  local n = redis.call('ZCARD', wait)
  nx = math.min(math.max(math.floor((n * 1000000 + rate - 1) / rate), minnext), maxnext)
  redis.call('ZADD', wait, now + math.max(2 * nx, hold), id)
end

touch(id)
redis.call('HSET', st, 's:' .. id, seq, 'a:' .. id, string.format('%d %d', grant, nx))
return finish(gen, ver, grant, nx, lost, 0, note)
`)

// peekScript reads a budget's state without changing it.
//
//	KEYS   state, members, waiting
//	ARGV   (none)
//	reply  spec, gen, ver, now (µs), a, b, live processes, waiting processes,
//	       what is corrupt ("" if nothing) — a is the pool's level
//	       (milli-tokens) for a bucket; for a window, a and b are the requests
//	       and milli-retries in the window (whose slot width it reads from
//	       the spec)
var peekScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty == 'none' then return {false, false, 0, now, 0, 0, 0, 0, ''} end
if ty ~= 'hash' then return {false, false, 0, now, 0, 0, 0, 0, 'the key holds a ' .. ty} end
local function int(x)
  local y = tonumber(x or '0')
  if y and y == math.floor(y) and y > -1e16 and y < 1e16 then return y end
  return nil
end
local function card(k)
  if redis.call('TYPE', k)['ok'] == 'zset' then return redis.call('ZCARD', k) end
  return 0
end
local v = redis.call('HMGET', KEYS[1], 'spec', 'gen', 'ver', 'clock', 'level')
if not v[1] then return {false, v[2] or false, 0, now, 0, 0, 0, 0, 'no spec'} end
local ver, clock = int(v[3]), int(v[4])
if not ver or not clock then return {v[1], v[2] or false, 0, now, 0, 0, 0, 0, 'version or clock'} end
now = math.max(now, clock)
local live, waiting = card(KEYS[2]), card(KEYS[3])
local width = tonumber(string.match(v[1], '^window (%d+)'))
local a, b
if not width then
  a, b = int(v[5]), 0
elseif width <= 0 then
  return {v[1], v[2] or false, ver, now, 0, 0, live, waiting, 'slot width'}
else
  local n = math.floor(now / width)
  a, b = 0, 0
  for s = n - 9, n do
    local w = redis.call('HMGET', KEYS[1], 'q:' .. s, 'r:' .. s)
    local q, r = int(w[1]), int(w[2])
    if not q or not r then a = nil break end
    a, b = a + q, b + r
  end
end
if not a or not b then return {v[1], v[2] or false, ver, now, 0, 0, live, waiting, 'a count'} end
return {v[1], v[2] or false, ver, now, a, b, live, waiting, ''}
`)
