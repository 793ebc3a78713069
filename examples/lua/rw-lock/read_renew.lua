-- rw-lock, read_renew (the read lock): Redisson's RedissonReadLock (renewExpirationAsync),
-- every ttl/3 while held: the hash and every reader's timeout keys (so live readers keep a
-- dead reader's keys alive too, as Redisson does).
-- KEYS[1] the lock; ARGV[1] the owner; ARGV[2] the ttl in ms.
-- Returns 1 (extended by the ttl) or 0 (not ours any more).
local timeouts = '{' .. KEYS[1] .. '}';
local counter = redis.call('hget', KEYS[1], ARGV[1]);
if (counter ~= false) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    if (redis.call('hlen', KEYS[1]) > 1) then
        local keys = redis.call('hkeys', KEYS[1]);
        for n, key in ipairs(keys) do
            counter = tonumber(redis.call('hget', KEYS[1], key));
            if type(counter) == 'number' then
                for i=counter, 1, -1 do
                    redis.call('pexpire', timeouts .. ':' .. key .. ':rwlock_timeout:' .. i, ARGV[2]);
                end;
            end;
        end;
    end;
    return 1;
end;
return 0;
