-- rw-lock, acquire (the write lock): Redisson's RedissonWriteLock (tryLockInnerAsync), one
-- hash per lock {mode, <owner>:write: count, <reader>: count}.
-- KEYS[1] the lock; ARGV[1] the owner; ARGV[2] the ttl in ms.
-- Taken when the lock has no mode, or re-entered when its mode is `write` and the writer is
-- this owner (the re-entry adds a ttl to what is left). Redisson answers nil when taken and
-- the hash's PTTL when not; lockaudit's convention says 1 and {0, pttl}.
local writer = ARGV[1] .. ':write';
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('hset', KEYS[1], 'mode', 'write');
    redis.call('hset', KEYS[1], writer, 1);
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 1;
end;
if (mode == 'write') then
    if (redis.call('hexists', KEYS[1], writer) == 1) then
        redis.call('hincrby', KEYS[1], writer, 1);
        local currentExpire = redis.call('pttl', KEYS[1]);
        redis.call('pexpire', KEYS[1], currentExpire + ARGV[2]);
        return 1;
    end;
end;
return {0, redis.call('pttl', KEYS[1])};
