//! Diesel table definitions, written by hand to match `migrations/` (both backends).

diesel::table! {
    conversations (id) {
        id -> Text,
        user_id -> Nullable<Text>,
        title -> Nullable<Text>,
        mode -> Text,
        visibility -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    messages (id) {
        id -> Text,
        conversation_id -> Text,
        position -> Integer,
        role -> Text,
        content -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    runs (id) {
        id -> Text,
        conversation_id -> Text,
        user_message_id -> Text,
        message_id -> Text,
        mode -> Text,
        status -> Text,
        error -> Nullable<Text>,
        request -> Text,
        owner -> Nullable<Text>,
        lease_until -> Nullable<BigInt>,
        prompt_tokens -> BigInt,
        completion_tokens -> BigInt,
        cost -> Nullable<Double>,
        last_seq -> BigInt,
        created_at -> BigInt,
        finished_at -> Nullable<BigInt>,
        needs_human_review -> Bool,
        review_reason -> Nullable<Text>,
        reviewed_at -> Nullable<BigInt>,
        review_note -> Nullable<Text>,
        lease_owner -> Nullable<Text>,
    }
}

diesel::table! {
    deliberation_stages (id) {
        id -> Text,
        message_id -> Text,
        position -> Integer,
        stage_type -> Text,
        stage_order -> Integer,
        model -> Nullable<Text>,
        role -> Nullable<Text>,
        content -> Text,
        parsed_data -> Nullable<Text>,
        response_time_ms -> Nullable<BigInt>,
        created_at -> BigInt,
    }
}

diesel::table! {
    run_events (run_id, seq) {
        run_id -> Text,
        seq -> BigInt,
        event -> Text,
        data -> Text,
        created_at -> BigInt,
    }
}

diesel::table! {
    run_journal (run_id, step) {
        run_id -> Text,
        step -> BigInt,
        kind -> Text,
        call_key -> Nullable<Text>,
        data -> Text,
        created_at -> BigInt,
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
    users (id) {
        id -> Text,
        name -> Text,
        is_admin -> Bool,
        created_at -> BigInt,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    api_tokens (id) {
        id -> Text,
        user_id -> Text,
        token_hash -> Text,
        kind -> Text,
        created_at -> BigInt,
        expires_at -> Nullable<BigInt>,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::joinable!(api_tokens -> users (user_id));
diesel::allow_tables_to_appear_in_same_query!(users, api_tokens);
