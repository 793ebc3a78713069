-- rw-lock, read_acquire (the read lock, shared): Redisson's RedissonReadLock
-- (tryLockInnerAsync). Each read level also sets a timeout key
-- {<lock>}:<owner>:rwlock_timeout:<level> with the lease; the hash lives as long as its
-- longest reader.
-- KEYS[1] the lock; ARGV[1] the owner; ARGV[2] the ttl in ms.
-- Taken when the lock has no mode, when its mode is `read` (readers share), or when its mode
-- is `write` and the writer is this owner (a writer may also read). Redisson answers nil
-- when taken and the hash's PTTL when not; lockaudit's convention says 1 and {0, pttl}.
local timeouts = '{' .. KEYS[1] .. '}:' .. ARGV[1] .. ':rwlock_timeout';
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('hset', KEYS[1], 'mode', 'read');
    redis.call('hset', KEYS[1], ARGV[1], 1);
    redis.call('set', timeouts .. ':1', 1);
    redis.call('pexpire', timeouts .. ':1', ARGV[2]);
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 1;
end;
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[1] .. ':write') == 1) then
    local ind = redis.call('hincrby', KEYS[1], ARGV[1], 1);
    local key = timeouts .. ':' .. ind;
    redis.call('set', key, 1);
    redis.call('pexpire', key, ARGV[2]);
    local remainTime = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[2]));
    return 1;
end;
return {0, redis.call('pttl', KEYS[1])};
