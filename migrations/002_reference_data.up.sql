-- Reference data: fare rules per class and the stations of the demo trains.
-- Money in paise. Safe to run against a database that already has the rows.

-- Tatkal clamps follow DOMAIN.md ("Fares"); 1A uses 2A's clamp and 3E uses
-- 3A's, as DOMAIN.md decides. Per-km basic fares, reservation charges and
-- superfast surcharges are invented but in the right proportions. GST (5%)
-- applies to AC classes only; clerkage is ₹65 in AC (₹60 + GST), ₹60 otherwise.
INSERT INTO fare_rules (class, paise_per_km, reservation_paise, superfast_paise,
                        tatkal_pct, tatkal_min_paise, tatkal_max_paise, tatkal_min_km,
                        gst_bps, ac, clerkage_paise) VALUES
    ('1A', 420, 6000, 4500, 30, 40000, 50000, 500, 500, true,  6500),
    ('2A', 250, 5000, 4500, 30, 40000, 50000, 500, 500, true,  6500),
    ('3A', 175, 4000, 4500, 30, 30000, 40000, 500, 500, true,  6500),
    ('3E', 165, 4000, 4500, 30, 30000, 40000, 500, 500, true,  6500),
    ('EC', 260, 6000, 4500, 30, 40000, 50000, 250, 500, true,  6500),
    ('CC', 130, 4000, 4500, 30, 12500, 22500, 250, 500, true,  6500),
    ('SL',  65, 2000, 3000, 30, 10000, 20000, 500,   0, false, 6000),
    ('2S',  40, 1500, 1500, 10,  1000,  1500, 100,   0, false, 6000)
ON CONFLICT DO NOTHING;

-- Region = first PNR digit for trains originating here (DOMAIN.md, "Codes"):
-- 1 SCR, 2-3 Delhi, 4-5 Chennai, 6-7 Kolkata, 8-9 Mumbai. Each station gets
-- the PRS region of its zone (Western/West Central to Mumbai, Eastern/East
-- Central to Kolkata, Northern/North Central/North Western to Delhi).
INSERT INTO stations (code, name, region) VALUES
    -- 12951 Mumbai Rajdhani
    ('MMCT', 'Mumbai Central', 8),
    ('BVI',  'Borivali', 8),
    ('ST',   'Surat', 8),
    ('BRC',  'Vadodara Jn', 8),
    ('RTM',  'Ratlam Jn', 9),
    ('NAD',  'Nagda Jn', 9),
    ('KOTA', 'Kota Jn', 9),
    ('NDLS', 'New Delhi', 2),
    -- 12301 Howrah Rajdhani
    ('HWH',  'Howrah Jn', 6),
    ('ASN',  'Asansol Jn', 6),
    ('DHN',  'Dhanbad Jn', 7),
    ('PNME', 'Parasnath', 7),
    ('GAYA', 'Gaya Jn', 7),
    ('DDU',  'Pt. Deen Dayal Upadhyaya Jn', 7),
    ('PRYJ', 'Prayagraj Jn', 2),
    ('CNB',  'Kanpur Central', 2),
    -- 12259 Sealdah-Bikaner Duronto
    ('SDAH', 'Sealdah', 6),
    ('LHU',  'Loharu Jn', 3),
    ('SDLP', 'Sadulpur Jn', 3),
    ('CUR',  'Churu', 3),
    ('RTGH', 'Ratangarh Jn', 3),
    ('SDGH', 'Sri Dungargarh', 3),
    ('BKN',  'Bikaner Jn', 3)
ON CONFLICT DO NOTHING;
