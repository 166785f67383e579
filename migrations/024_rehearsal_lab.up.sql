-- The rehearsal lab (issue 15): sandbox shards a rehearsal may create and
-- pull levers on (never a real window), each entrant's arrival time for
-- the fairness figures, the figures computed after every window, and the
-- lab's runs with their reports.

ALTER TABLE inventory_shards ADD COLUMN sandbox boolean NOT NULL DEFAULT false;

-- When the entrant joined the queue (the ENTER that created its place),
-- copied from Redis when the window is sealed.
ALTER TABLE admission_entrants ADD COLUMN entered_at timestamptz;

-- Fairness figures of one window, computed by a River job after the draw.
CREATE TABLE window_fairness (
    shard_id     bigint PRIMARY KEY REFERENCES admission_windows (shard_id),
    computed_at  timestamptz NOT NULL DEFAULT now(),
    entrants     int NOT NULL,
    -- Spearman's rho between arrival time and queue rank inside the
    -- randomised window (near 0 when arrival buys nothing); null below 3.
    spearman_rho double precision,
    verified     boolean NOT NULL,
    figures      jsonb NOT NULL
);

-- The lab's rehearsals: who started which, and the report once done.
CREATE TABLE rehearsals (
    id          bigserial PRIMARY KEY,
    started_by  text NOT NULL,
    options     jsonb NOT NULL,
    state       text NOT NULL CHECK (state IN ('RUNNING', 'DONE', 'FAILED')),
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    error       text,
    report      jsonb
);
