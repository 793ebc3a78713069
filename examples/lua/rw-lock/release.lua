-- rw-lock, release (the write lock): Redisson's RedissonWriteLock (unlockInnerAsync). One
-- write level less; at zero the hash is deleted (or left in mode `read` if this owner still
-- reads) and the unlock published on Redisson's channel.
-- KEYS[1] the lock; ARGV[1] the owner; ARGV[2] the ttl in ms.
-- Redisson answers nil (not ours), 0 (still held: nested) or 1 (unlocked, and also when the
-- hash is gone: a holder whose lease ran out is told its release worked, as the built-in
-- rw-lock is); lockaudit's convention says 0 for not ours and 1 for the others.
local writer = ARGV[1] .. ':write';
local channel = 'redisson_rwlock:{' .. KEYS[1] .. '}';
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('publish', channel, 1);
    return 1;
end;
if (mode == 'write') then
    local lockExists = redis.call('hexists', KEYS[1], writer);
    if (lockExists == 0) then
        return 0;
    else
        local counter = redis.call('hincrby', KEYS[1], writer, -1);
        if (counter > 0) then
            redis.call('pexpire', KEYS[1], ARGV[2]);
            return 1;
        else
            redis.call('hdel', KEYS[1], writer);
            if (redis.call('hlen', KEYS[1]) == 1) then
                redis.call('del', KEYS[1]);
                redis.call('publish', channel, 1);
            else
                redis.call('hset', KEYS[1], 'mode', 'read');
            end;
            return 1;
        end;
    end;
end;
return 0;
