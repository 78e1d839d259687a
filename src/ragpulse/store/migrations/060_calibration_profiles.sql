-- Calibration profiles: a judge version's confusion counts against human labels (ragpulse calibrate --save).
CREATE TABLE calibration_profiles (
    name               text NOT NULL,
    judge              text NOT NULL,
    judge_version      text NOT NULL,
    dataset_sha256     text NOT NULL,
    n                  integer NOT NULL CHECK (n >= 0),
    tp                 integer NOT NULL CHECK (tp >= 0),
    fp                 integer NOT NULL CHECK (fp >= 0),
    tn                 integer NOT NULL CHECK (tn >= 0),
    fn                 integer NOT NULL CHECK (fn >= 0),
    sensitivity        double precision,
    sensitivity_lower  double precision,
    sensitivity_upper  double precision,
    specificity        double precision,
    specificity_lower  double precision,
    specificity_upper  double precision,
    threshold          double precision,
    backend            text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (judge, judge_version, name)
);
CREATE INDEX calibration_profiles_newest ON calibration_profiles (judge, judge_version, created_at DESC);
