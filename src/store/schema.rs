//! Diesel table definitions, written by hand to match `migrations/sqlite` and
//! `migrations/postgres`. JSON columns are `types::Json` and times `types::Millis`, which map to
//! each backend's own types: one definition serves both.

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    conversations (id) {
        id -> Text,
        user_id -> Nullable<Text>,
        title -> Nullable<Text>,
        mode -> Text,
        visibility -> Text,
        created_at -> Millis,
        updated_at -> Millis,
        eval_id -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    messages (id) {
        id -> Text,
        conversation_id -> Text,
        position -> Integer,
        role -> Text,
        content -> Text,
        created_at -> Millis,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    runs (id) {
        id -> Text,
        conversation_id -> Text,
        user_message_id -> Text,
        message_id -> Text,
        mode -> Text,
        status -> Text,
        error -> Nullable<Text>,
        request -> Json,
        owner -> Nullable<Text>,
        lease_until -> Nullable<Millis>,
        prompt_tokens -> BigInt,
        completion_tokens -> BigInt,
        cost -> Nullable<Double>,
        last_seq -> BigInt,
        created_at -> Millis,
        finished_at -> Nullable<Millis>,
        needs_human_review -> Bool,
        review_reason -> Nullable<Text>,
        reviewed_at -> Nullable<Millis>,
        review_note -> Nullable<Text>,
        lease_owner -> Nullable<Text>,
        outcome -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    deliberation_stages (id) {
        id -> Text,
        message_id -> Text,
        position -> Integer,
        stage_type -> Text,
        stage_order -> Integer,
        model -> Nullable<Text>,
        role -> Nullable<Text>,
        content -> Text,
        parsed_data -> Nullable<Json>,
        response_time_ms -> Nullable<BigInt>,
        created_at -> Millis,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    run_events (run_id, seq) {
        run_id -> Text,
        seq -> BigInt,
        event -> Text,
        data -> Json,
        created_at -> Millis,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    run_journal (run_id, step) {
        run_id -> Text,
        step -> BigInt,
        kind -> Text,
        call_key -> Nullable<Text>,
        data -> Json,
        created_at -> Millis,
    }
}

diesel::joinable!(messages -> conversations (conversation_id));
diesel::joinable!(runs -> conversations (conversation_id));
diesel::allow_tables_to_appear_in_same_query!(
    conversations,
    messages,
    runs,
    deliberation_stages,
    run_events,
    run_journal
);

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    users (id) {
        id -> Text,
        name -> Text,
        is_admin -> Bool,
        created_at -> Millis,
        revoked_at -> Nullable<Millis>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    api_tokens (id) {
        id -> Text,
        user_id -> Text,
        token_hash -> Text,
        kind -> Text,
        created_at -> Millis,
        expires_at -> Nullable<Millis>,
        revoked_at -> Nullable<Millis>,
    }
}

diesel::joinable!(api_tokens -> users (user_id));
diesel::allow_tables_to_appear_in_same_query!(users, api_tokens);

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::Millis;

    share_links (id) {
        id -> Text,
        run_id -> Text,
        token_hash -> Text,
        hide_models -> Bool,
        created_by -> Nullable<Text>,
        created_at -> Millis,
        revoked_at -> Nullable<Millis>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::{Json, Millis};

    evals (id) {
        id -> Text,
        set_name -> Text,
        set_hash -> Text,
        questions -> Json,
        settings -> Json,
        status -> Text,
        note -> Nullable<Text>,
        owner -> Nullable<Text>,
        created_at -> Millis,
        finished_at -> Nullable<Millis>,
    }
}

diesel::table! {
    use diesel::sql_types::*;

    eval_runs (eval_id, arm, question_id, sample) {
        eval_id -> Text,
        arm -> Text,
        question_id -> Text,
        sample -> Integer,
        run_id -> Text,
        grade -> Text,
        answer -> Nullable<Text>,
        prompt_tokens -> BigInt,
        completion_tokens -> BigInt,
        cost -> Nullable<Double>,
        latency_ms -> BigInt,
    }
}

diesel::joinable!(eval_runs -> evals (eval_id));
diesel::allow_tables_to_appear_in_same_query!(evals, eval_runs);

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::Millis;

    attachment_blobs (sha256) {
        sha256 -> Text,
        kind -> Text,
        size -> BigInt,
        content -> Binary,
        text -> Text,
        pages -> Nullable<Integer>,
        created_at -> Millis,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::store::types::Millis;

    attachments (id) {
        id -> Text,
        sha256 -> Text,
        name -> Text,
        media_type -> Text,
        owner -> Nullable<Text>,
        created_at -> Millis,
    }
}

diesel::table! {
    use diesel::sql_types::*;

    run_attachments (run_id, position) {
        run_id -> Text,
        position -> Integer,
        attachment_id -> Text,
    }
}

diesel::joinable!(attachments -> attachment_blobs (sha256));
diesel::joinable!(run_attachments -> attachments (attachment_id));
diesel::allow_tables_to_appear_in_same_query!(attachment_blobs, attachments, run_attachments);
