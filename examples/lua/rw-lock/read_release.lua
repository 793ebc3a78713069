-- rw-lock, read_release (the read lock): Redisson's RedissonReadLock (unlockInnerAsync). One
-- read level less and its timeout key deleted; while other holders remain, the hash lives
-- as long as the longest reader's timeout key; the last one deletes it and publishes.
-- KEYS[1] the lock; ARGV[1] the owner; ARGV[2] the ttl in ms.
-- Redisson answers nil (not ours), 0 (still held) or 1 (unlocked, and also when the hash is
-- gone); lockaudit's convention says 0 for not ours and 1 for the others.
local channel = 'redisson_rwlock:{' .. KEYS[1] .. '}';
local timeouts = '{' .. KEYS[1] .. '}';
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call('publish', channel, 0);
    return 1;
end;
local lockExists = redis.call('hexists', KEYS[1], ARGV[1]);
if (lockExists == 0) then
    return 0;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[1], -1);
if (counter == 0) then
    redis.call('hdel', KEYS[1], ARGV[1]);
end;
redis.call('del', timeouts .. ':' .. ARGV[1] .. ':rwlock_timeout:' .. (counter+1));
if (redis.call('hlen', KEYS[1]) > 1) then
    local maxRemainTime = -3;
    local keys = redis.call('hkeys', KEYS[1]);
    for n, key in ipairs(keys) do
        counter = tonumber(redis.call('hget', KEYS[1], key));
        if type(counter) == 'number' then
            for i=counter, 1, -1 do
                local remainTime = redis.call('pttl', timeouts .. ':' .. key .. ':rwlock_timeout:' .. i);
                maxRemainTime = math.max(remainTime, maxRemainTime);
            end;
        end;
    end;
    if maxRemainTime > 0 then
        redis.call('pexpire', KEYS[1], maxRemainTime);
        return 1;
    end;
    if mode == 'write' then
        return 1;
    end;
end;
redis.call('del', KEYS[1]);
redis.call('publish', channel, 0);
return 1;
